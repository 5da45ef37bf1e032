# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""What the plan states about the fabric under a tensor-parallel group and the NCCL its ranks load (issue 39).

The profile's ``fabric`` (``mtu``, ``bandwidth_floor_gbit``, ``measure_seconds``) and ``image.nccl_min_version``,
read once here for the rules (rules_fabric.py) and for the plan's ``fabric`` entry, which node_preflight measures
the ranks against (``_fabric.py``: the interface up at the MTU, iperf3 between the head and each rank).
"""

from __future__ import annotations

import re

from .. import _fabric

# NCCL's Python distributions (what torch's CUDA wheels load; vLLM's images carry one): cu12 and cu13 builds.
NCCL_DISTRIBUTIONS = ("nvidia-nccl-cu12", "nvidia-nccl-cu13")
# Multi-node CUDA-graph replay deadlocks with NCCL 2.28.9 and serves with 2.30.4 (vllm-project/vllm#52504 on two DGX
# Sparks, TP=2 across nodes; vllm-project/vllm#40969 on eight): the field asks for NCCL >= 2.30.4 with multi-node
# CUDA graphs (vllm-project/vllm#42354, #41725).
DEFAULT_NCCL_MIN = "2.30.4"
# Variables that make vLLM load an NCCL from outside the image (vllm/envs.py VLLM_NCCL_SO_PATH; the dynamic loader's
# own): a host library can differ from node to node, the case of vllm-project/vllm#41725 (same 2.28.9, two builds).
NCCL_OUTSIDE_IMAGE_ENV = ("VLLM_NCCL_SO_PATH", "LD_PRELOAD", "LD_LIBRARY_PATH")


def settings(profile):
    """{mtu, bandwidth_floor_gbit, measure_seconds, problems}: the profile's fabric values, defaults filled in."""
    given = (profile or {}).get("fabric") or {}
    problems = []
    if not isinstance(given, dict):
        return {
            "mtu": None,
            "bandwidth_floor_gbit": _fabric.DEFAULT_FLOOR_GBIT,
            "measure_seconds": _fabric.DEFAULT_SECONDS,
            "problems": [f"fabric is {given!r}: give a mapping (mtu, bandwidth_floor_gbit, measure_seconds)"],
        }
    mtu = given.get("mtu")
    low, high = _fabric.MTU_RANGE
    if mtu is not None and (isinstance(mtu, bool) or not isinstance(mtu, int) or not low <= mtu <= high):
        problems.append(f"fabric.mtu is {mtu!r}: give the MTU every rank's fabric interface has, {low} to {high}")
        mtu = None
    floor = given.get("bandwidth_floor_gbit", _fabric.DEFAULT_FLOOR_GBIT)
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or floor < 0:
        problems.append(
            f"fabric.bandwidth_floor_gbit is {floor!r}: give the Gbit/s below which a split is refused (0: measure "
            "and print only)"
        )
        floor = _fabric.DEFAULT_FLOOR_GBIT
    seconds = given.get("measure_seconds", _fabric.DEFAULT_SECONDS)
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not 1 <= seconds <= 60:
        problems.append(f"fabric.measure_seconds is {seconds!r}: give 1 to 60 seconds of iperf3 per rank")
        seconds = _fabric.DEFAULT_SECONDS
    return {"mtu": mtu, "bandwidth_floor_gbit": float(floor), "measure_seconds": seconds, "problems": problems}


def fabric_check(ctx):
    """The plan's ``fabric`` entry (None in replicas): the head, each rank's interface and address, the MTU, the floor
    and how long iperf3 measures; what node_preflight holds the ranks to before the group starts."""
    if not ctx.tensor_parallel:
        return None
    values = settings(ctx.profile)
    return {
        "head": ctx.head,
        "ranks": {
            host: {"interface": ctx.per_node[host]["ifname"], "address": ctx.per_node[host]["address"]}
            for host in ctx.hosts
        },
        "mtu": values["mtu"],
        "bandwidth_floor_gbit": values["bandwidth_floor_gbit"],
        "measure_seconds": values["measure_seconds"],
    }


# Where a tensor-parallel profile states no image.nccl_min_version, the GB10 default applies (the item 4 asks
# to refuse "a build below a profile's minimum"; the field's minimum is cited, so a profile need not restate it).
DEFAULT_NCCL_MIN_SOURCE = (
    "the GB10 default: NCCL >= 2.30.4 with multi-node CUDA graphs, vllm-project/vllm#42354, #41725, #52504; "
    "image.nccl_min_version sets another"
)


def nccl_check(ctx):
    """The plan's ``nccl`` entry (None in replicas): the ranks, the NCCL minimum, where it comes from and whether the
    group captures CUDA graphs across nodes; what roles/serving_image holds each rank's recorded NCCL to."""
    if not ctx.tensor_parallel:
        return None
    given = ctx.image.get("nccl_min_version")
    return {
        "ranks": list(ctx.hosts),
        "min_version": str(given or DEFAULT_NCCL_MIN),
        "min_source": "image.nccl_min_version" if given else DEFAULT_NCCL_MIN_SOURCE,
        "cuda_graphs": ctx.tp_size >= 2 and cuda_graphs(ctx.options),
    }


def cuda_graphs(options):
    """Whether vLLM captures CUDA graphs with these options (no enforce-eager, cudagraph_mode not NONE)."""
    if options.get("enforce-eager") in (True, "true", "True"):
        return False
    config = options.get("compilation-config")
    return not (isinstance(config, dict) and str(config.get("cudagraph_mode", "")).upper() == "NONE")


def nccl_pins(critical_pins):
    """{distribution: version} of the NCCL distributions among the image's critical pins."""
    pins = {}
    for name, version in (critical_pins or {}).items():
        canonical = str(name).lower().replace("_", "-").replace(".", "-")
        if canonical in NCCL_DISTRIBUTIONS:
            pins[canonical] = str(version)
    return pins


# NCCL's release numbers (2.30.4; a wheel may add a local or post part, which does not order releases here).
_RELEASE = re.compile(r"^\s*(\d+(?:\.\d+)*)")


def _release(version):
    found = _RELEASE.match(str(version))
    return tuple(int(part) for part in found.group(1).split(".")) if found else None


def below(version, minimum):
    """Whether ``version`` is below ``minimum`` (None where either is no version).

    Plain numbers, not packaging.version: the plan is imported on the nodes too (plugins/modules import _plan through
    module_utils), where python3-packaging may not be installed yet."""
    have, want = _release(version), _release(minimum)
    if have is None or want is None:
        return None
    width = max(len(have), len(want))
    return have + (0,) * (width - len(have)) < want + (0,) * (width - len(want))
