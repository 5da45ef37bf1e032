# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The serving plan: what every node runs, the memory arithmetic of every node, and every violation at once.

``plan(profile_name, profiles, nodes, ...)`` is a short pipeline: the profile rules (is there a profile?),
then the planning context with every derived value (``context.py``, ``argv.py``), then every registered rule
(``rules_*.py``, registered in ``registry.py``), then the result. Nothing is raised for a bad profile: the
operator sees every problem at once, before any node is touched. Each violation is
``{"node", "rule", "value", "message"}`` (``violation.py``) with the numbers and the fix. No Ansible import
here; ``plugins/action/serving_plan.py`` is the Ansible face.

Adding a rule: one function decorated with ``@rule(name, pitfall=...)`` in the ``rules_*.py`` of its concern,
and one test named ``test_<name>`` under tests/unit (README, "Contributing: adding a plan rule").
"""

from __future__ import annotations

# The rule modules register their rules on import, in this order (the order of the plan's violations).
# isort: off
from . import rules_profile  # noqa: F401
from . import rules_model  # noqa: F401
from . import rules_options  # noqa: F401
from . import rules_nodes  # noqa: F401
from . import rules_inputs  # noqa: F401
from . import rules_tp  # noqa: F401
from . import rules_ray  # noqa: F401
from . import rules_memory  # noqa: F401
from . import rules_proxy_vip  # noqa: F401
from . import rules_api  # noqa: F401
from . import rules_exposure  # noqa: F401
from . import rules_fabric  # noqa: F401

# isort: on
from .. import _answer_check
from . import registry
from .argv import RAY_PORT
from .context import (
    CONTAINER_HF_CACHE,
    CONTAINER_PATHS,
    DEFAULT_HF_CACHE,
    DEFAULT_PORT,
    TOPOLOGIES,
    Context,
    derive,
    fabric_fence,
    mp_launch,
    ray_fence,
    snapshot_dir,
)
from .fabric import fabric_check, nccl_check
from .render import format_plan
from .rules_model import DIGEST_REF_RE
from .tokenizer import tokenizer_needs
from .units import site_units
from .violation import ALL_NODES, format_violations, violation

__all__ = [
    "ALL_NODES",
    "CONTAINER_HF_CACHE",
    "CONTAINER_PATHS",
    "DEFAULT_HF_CACHE",
    "DEFAULT_PORT",
    "DIGEST_REF_RE",
    "RAY_PORT",
    "TOPOLOGIES",
    "format_plan",
    "format_violations",
    "plan",
    "snapshot_dir",
    "violation",
]


# The context ladder's rungs where a profile names none (seed 004: 32K serves, 128K and 256K are what users try).
LADDER_RUNGS = (32768, 131072, 262144)
# What the ladder holds a rung's recall answers to where a profile names nothing (context_recall).
LADDER_RECALL = "needle"


def plan(
    profile_name,
    profiles,
    nodes,
    fabric_cidr=None,
    ray_head=None,
    ray_workers=(),
    catalog_dir=None,
    api=None,
    site=None,
    image_catalog_dir=None,
):
    """Build the serving plan.

    profile_name: the operator's ``serving_profile``; profiles: the inventory's ``serving_profiles``.
    nodes: ``{host: {"fabric_interface", "fabric_address", "facts": {mem_total_mib, mem_available_mib, cores,
    interfaces: {ifname: "addr/prefix"}}, "facts_source": {...}, "other_work_reserve_gib", "snapshot_path",
    "hf_cache_dir"}}``; fabric_cidr: the fabric subnet; ray_head / ray_workers: the tensor-parallel group.
    In tensor-parallel, ``group`` holds what vLLM runs every rank at (``tp.py``): the one share, the smallest
    rank's KV tokens, the tightest headroom and the heads; a per-node value on a Ray worker is refused.
    api: the proxy's public frontend, ``{key_set, anonymous, bind, port, tls, ca, client_host, vip_address,
    fabric_address}`` (whether gb10_api_key is set, never the key) and ``frontends``, each proxy node's ``{key_set,
    key_shape, anonymous, bind, port}`` (the key's length and unmatchable characters, never the key), printed and
    checked by ``rules_api.py`` (roles/proxy's preflight reads that verdict); the
    result's ``api`` adds what clients use (``scheme``, ``url``, ``ca``: ``context.client_api``), which every client
    of the collection reads (bench.yml, roles/proxy_vip); None leaves it out.
    site: who may reach what (``exposure.py``: the proxy and monitoring hosts, every host's address, the
    collection's ports, gb10_fence_open); the result's ``exposure`` is ``{host: [entry]}``, what
    roles/fabric_firewall renders; None leaves it None (roles/fabric_firewall then refuses to run).
    """
    ctx = Context(
        profile_name, profiles, nodes, fabric_cidr, ray_head, ray_workers, catalog_dir, api, site, image_catalog_dir
    )
    result = {
        "profile": profile_name,
        "topology": None,
        "image": None,
        "vllm_version": None,
        # the option catalog the argv was checked against: source collection, image (built by the serving-image gate
        # from the image's own parser, kept in image_catalog_dir) or pending (none yet: vllm_options unchecked)
        "vllm_catalog": None,
        "model": None,
        "nodes": {},
        "group": None,
        "ray": None,
        "mp": None,
        "fence": None,
        "exposure": None,
        "violations": registry.run(ctx, stage="profile"),
        # site-wide, whatever the profile: a node retires every managed unit that its role does not write
        "units": site_units(),
        # where the engine containers mount the node's caches (context.CONTAINER_PATHS): roles/serving's mounts,
        # roles/flashinfer_jit's workspace; each node's container_env points there
        "container_paths": dict(CONTAINER_PATHS),
    }
    if result["violations"]:
        return result
    derive(ctx)
    result.update(
        topology=ctx.topology,
        image=ctx.image.get("ref"),
        vllm_version=ctx.image.get("vllm_version"),
        vllm_catalog=ctx.catalog_source,
        model={
            "repo_id": ctx.repo_id,
            "revision": ctx.revision,
            "served_model_name": ctx.served_name,
            # what a request may hold, prompt and completion together: --max-model-len, else the model's own length
            "context_length": ctx.context_length or ctx.max_positions,
        },
        nodes=ctx.entries,
        group=ctx.group,
        violations=registry.run(ctx),
    )
    result["tensor_parallel_size"] = ctx.tp_size
    result["bind_all_interfaces"] = ctx.bind_all_interfaces
    # the hosts that run a vLLM the proxy fronts, sorted: every role and playbook reads this list
    result["serving_hosts"] = sorted(host for host, entry in ctx.entries.items() if entry["serves"])
    result["launcher"] = ctx.launcher if ctx.tensor_parallel else None
    result["ray"] = ray_fence(ctx)
    result["mp"] = mp_launch(ctx)
    # what roles/fabric_firewall lets in only from the group's ranks, for either launcher
    result["fence"] = fabric_fence(ctx)
    # every port of the collection on each node and who may reach it: what roles/fabric_firewall renders
    result["exposure"] = ctx.exposure
    result["exposure_names"] = (
        {str(address): host for host, address in (ctx.site.get("addresses") or {}).items() if address}
        if ctx.site is not None
        else {}
    )
    result["api"] = dict(ctx.api) if ctx.api is not None else None
    # what the image gate holds the built image to (roles/serving_image), and the context ladder's rungs
    # (playbooks/context_ladder.yml): read here so that no role or playbook reads the profile itself
    result["critical_pins"] = dict(ctx.image.get("critical_pins") or {})
    result["context_rungs"] = [int(rung) for rung in ctx.profile.get("context_rungs") or LADDER_RUNGS]
    result["context_recall"] = ctx.profile.get("context_recall") or LADDER_RECALL
    # the rolling upgrade's answer check (roles/upgrade_node): its greedy prompts, length and tolerance (the
    # defaults where the profile names none; an unusable one is the answer_check_invalid violation)
    try:
        result["answer_check"] = _answer_check.settings(ctx.profile.get("answer_check"))
    except ValueError:
        result["answer_check"] = _answer_check.settings(None)
    # what roles/model_weights checks the fetched tokenizer for, before a replica loads the model (tokenizer.py)
    result["tokenizer_needs"] = tokenizer_needs(ctx.options, ctx.catalog)
    # what node_preflight measures a tensor-parallel group's fabric against before it starts (issue 39 item 3):
    # each rank's interface and address, the MTU, the bandwidth floor and iperf3's seconds; None in replicas
    result["fabric"] = fabric_check(ctx)
    # what roles/serving_image holds the NCCL each rank's image loads to (issue 39 item 4): the ranks, the minimum
    # (the profile's image.nccl_min_version, else the cited GB10 default) and whether CUDA graphs span the nodes
    result["nccl"] = nccl_check(ctx)
    return result
