# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Rules on the fabric under a tensor-parallel group and the NCCL its ranks load (issue 39, items 3 and 4).

What the plan can judge before any node is touched: the profile's fabric values, and the NCCL the image is held to
(its critical pins, which the serving-image gate checks in the built image on the build node, the one digest every
rank runs). What only the nodes can show (the interface up at the MTU, the bandwidth) node_preflight measures against
the plan's ``fabric`` entry (``_fabric.py``).
"""

from __future__ import annotations

from . import fabric as _fabric_plan
from .checks import refuse
from .registry import rule
from .violation import ALL_NODES, violation

_NCCL = "issue 39: different NCCL builds on the ranks hang multi-node CUDA graphs (vllm-project/vllm#42354, #41725)"


@rule("fabric_settings", pitfall="input validation")
def fabric_settings(ctx):
    for problem in _fabric_plan.settings(ctx.profile)["problems"]:
        yield violation(ALL_NODES, "fabric_settings", (ctx.profile or {}).get("fabric"), problem)


@rule("tp_nccl_below_minimum", pitfall=_NCCL)
def tp_nccl_below_minimum(ctx):
    """Multi-node CUDA graphs with an NCCL the image is pinned to below the minimum (vllm-project/vllm#52504)."""
    if not ctx.tensor_parallel or ctx.tp_size < 2 or not _fabric_plan.cuda_graphs(ctx.options):
        return
    minimum = str(ctx.image.get("nccl_min_version") or _fabric_plan.DEFAULT_NCCL_MIN)
    if _fabric_plan.below(minimum, minimum) is None:
        yield violation(
            ALL_NODES,
            "tp_nccl_below_minimum",
            minimum,
            f"image.nccl_min_version {minimum} is not a version: give NCCL's release numbers (2.30.4)",
        )
        return
    for name, version in sorted(_fabric_plan.nccl_pins(ctx.image.get("critical_pins")).items()):
        low = _fabric_plan.below(version, minimum)
        if low is None:
            yield violation(
                ALL_NODES,
                "tp_nccl_below_minimum",
                version,
                f"image.critical_pins {name}=={version} or image.nccl_min_version {minimum} is not a version: give "
                "both as NCCL's release numbers (2.30.4)",
            )
        elif low:
            yield violation(
                ALL_NODES,
                "tp_nccl_below_minimum",
                version,
                f"the image is pinned to {name} {version}, below {minimum}: captured CUDA graphs with NCCL "
                f"collectives deadlock across nodes with it within a few requests (vllm-project/vllm#52504: NCCL "
                f"2.28.9 hangs, 2.30.4 serves). Fix: a base image with {name}>={minimum} and its pin, or "
                "enforce-eager: true in vllm_options",
            )


@rule("tp_nccl_outside_image", pitfall=_NCCL)
def tp_nccl_outside_image(ctx):
    """An NCCL loaded from outside the image: a host library may be another build on each node (#41725)."""
    if not ctx.tensor_parallel:
        return
    env = ctx.profile.get("env") or {}
    named = sorted(
        key
        for key in _fabric_plan.NCCL_OUTSIDE_IMAGE_ENV
        if key in env and (key == "VLLM_NCCL_SO_PATH" or "nccl" in str(env[key]).lower())
    )
    yield from refuse(
        bool(named),
        "tp_nccl_outside_image",
        ", ".join(f"{key}={env[key]}" for key in named) or None,
        "the profile's env makes the ranks load NCCL from outside the image ({}): every rank must load the same "
        "NCCL build, and a library on each node can be another build of the same version (vllm-project/vllm#41725: "
        "the pip wheel and the DGX OS libnccl2, both 2.28.9, differ). Fix: remove it and put the NCCL you want in "
        "the image (its critical pin holds every rank to it)".format(", ".join(named)),
    )
