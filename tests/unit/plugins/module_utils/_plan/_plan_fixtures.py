# Copyright: gb10.serving maintainers
# Apache-2.0
"""Shared inputs of the serving-plan tests: a clean tensor-parallel and a clean replicas profile on two nodes."""

from __future__ import annotations

import copy
import importlib
import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[5]

_BASE = "ansible_collections.gb10.serving.plugins.module_utils."
plan_mod = importlib.import_module(_BASE + "_plan")
catalog_mod = importlib.import_module(_BASE + "_vllm_catalog")
memory_mod = importlib.import_module(_BASE + "_memory")
node_inputs = importlib.import_module(_BASE + "_node_inputs")

DIGEST = "sha256:" + "ab" * 32
REVISION = "3f9a1c7e5b2d8a4f6c0e1b3d5a7f9c2e4b6d8a0f"
CIDR = "192.168.200.0/24"

TP_PROFILE = {
    "topology": "tensor_parallel",
    # Ray's units (the launcher most of these tests exercise); MP_PROFILE is the same group on vLLM's own launch.
    "launcher": "ray",
    "model": {
        "repo_id": "LibertAIDAI/GLM-5.3-Flash-NVFP4",
        "revision": REVISION,
        "served_model_name": "glm-5.3-flash",
        "checkpoint_gib": 181.3,
        "max_position_embeddings": 262144,
        "mtp_layers": 1,
        "multimodal": True,
        "text_only": True,
        "modalities": ["image", "video"],
        "attention": {"kv_bytes_per_token": 6961},
    },
    "image": {"ref": "ghcr.io/example-org/spark-vllm@" + DIGEST, "vllm_version": "0.32.0"},
    "context_length": 262144,
    "vllm_options": {
        "distributed-executor-backend": "ray",
        "kv-cache-dtype": "fp8",
        "limit-mm-per-prompt": {"image": 0, "video": 0},
        "enable-auto-tool-choice": True,
        "tool-call-parser": "glm47",
    },
    "env": {},
    # shm_size: each rank's /dev/shm where the launcher is mp (Ray's containers use the host's), counted in its
    # memory table: 256m keeps the mp variants of this group at 0.83 (the plan's default 1g would leave 4.37 GiB).
    "memory": {"margin_gib": 5, "activation_reserve_gib": 3, "shm_size": "256m"},
    "max_jobs": 2,
    # One share for the group (vLLM applies the head's to every rank): 0.83 keeps spark-b, the tighter node,
    # at 5.37 GiB of headroom (5.12 with an mp rank's 256m /dev/shm); 0.85 would leave it 2.94.
    "defaults": {"gpu_memory_utilization": 0.83, "max_num_seqs": 8},
    "nodes": {},
}

# The same group on vLLM's own multi-node launch (launcher mp, the default, written out): the launcher writes
# --distributed-executor-backend, so vllm_options names none.
MP_PROFILE = copy.deepcopy(TP_PROFILE)
MP_PROFILE["launcher"] = "mp"
del MP_PROFILE["vllm_options"]["distributed-executor-backend"]

REPLICAS_PROFILE = {
    "topology": "replicas",
    "model": {
        "repo_id": "example-org/GLM-5.3-Flash-NVFP4-QAD",
        "revision": "8b2e4d6f0a1c3e5b7d9f1a3c5e7b9d0f2a4c6e8b",
        "served_model_name": "glm-5.3-flash",
        "checkpoint_gib": 71,
        "max_position_embeddings": 262144,
        "mtp_layers": 1,
        "multimodal": True,
        "text_only": True,
        "attention": {"kv_bytes_per_token": 16340},
    },
    "image": {"ref": "ghcr.io/example-org/spark-vllm-b12x@" + DIGEST, "vllm_version": "0.32.0"},
    "context_length": 262144,
    "vllm_options": {"kv-cache-dtype": "fp8", "limit-mm-per-prompt": {"image": 0, "video": 0}},
    "speculative": {"method": "mtp", "num_tokens": 4, "drafter_gib": 2},
    "memory": {"margin_gib": 5, "activation_reserve_gib": 5.5},
    "max_jobs": 2,
    "defaults": {"max_num_seqs": 12},
    "nodes": {"spark-a": {"gpu_memory_utilization": 0.78}, "spark-b": {"gpu_memory_utilization": 0.74}},
}


def node(address, available_mib, reserve_gib, ifname="enp1s0f0np0"):
    return {
        "fabric_interface": ifname,
        "fabric_address": address,
        "facts": {
            "mem_total_mib": 124608,
            "mem_available_mib": available_mib,
            "cores": 20,
            "interfaces": {ifname: address + "/24", "enP7s7": "192.168.1." + address.rsplit(".", 1)[1] + "/24"},
        },
        "facts_source": {},
        "other_work_reserve_gib": reserve_gib,
        "snapshot_path": None,
        "hf_cache_dir": "/var/lib/gb10/hf-cache",
    }


def nodes():
    return {"spark-a": node("192.168.200.11", 117500, 1), "spark-b": node("192.168.200.12", 112000, 3)}


# The collection's listeners at their roles' defaults (plugins/action/serving_plan.py reads the same files).
PORTS = {
    "proxy_client": 8080,
    "warm_agent": 8009,
    "proxy_metrics": 8405,
    "prometheus": 9090,
    "node_exporter": 9100,
    "weights_fanout": 18741,
    "flashinfer_share": 18761,
}


def site(proxies=("spark-a", "spark-b"), monitoring=("spark-a",), addresses=None, ports=None, opened=()):
    """Who may reach what on the pair, as the serving_plan action hands it to plan() (exposure.py)."""
    addresses = dict(addresses or {"spark-a": "192.168.200.11", "spark-b": "192.168.200.12"})
    return {
        "proxies": list(proxies),
        "monitoring": list(monitoring),
        "addresses": addresses,
        "ports": {host: dict(ports or PORTS) for host in addresses},
        "open": [dict(o) for o in opened],
    }


def run(profile, node_map=None, name="p", **kwargs):
    """Plan ``profile`` on the pair (spark-a head, spark-b worker), both proxies, spark-a the monitoring node."""
    given = node_map if node_map is not None else nodes()
    kwargs.setdefault("site", site(addresses={h: n.get("fabric_address") for h, n in given.items()}))
    kwargs.setdefault("fabric_cidr", CIDR)
    kwargs.setdefault("ray_head", "spark-a")
    kwargs.setdefault("ray_workers", ["spark-b"])
    return plan_mod.plan(name, {name: profile}, node_map if node_map is not None else nodes(), **kwargs)


def tp(**changes):
    return _changed(TP_PROFILE, changes)


def mp(**changes):
    return _changed(MP_PROFILE, changes)


def replicas(**changes):
    return _changed(REPLICAS_PROFILE, changes)


def _changed(base, changes):
    profile = copy.deepcopy(base)
    for dotted, value in changes.items():
        keys = dotted.split("__")
        target = profile
        for key in keys[:-1]:
            target = target.setdefault(key, {})
        if value is _DELETE:
            target.pop(keys[-1], None)
        else:
            target[keys[-1]] = value
    return profile


_DELETE = object()
DELETE = _DELETE


def rules(result):
    return [v["rule"] for v in result["violations"]]


def only(result, rule):
    """The one violation of ``result``, which must be ``rule`` (and the only one)."""
    assert rules(result) == [rule], result["violations"]
    return result["violations"][0]


# --- the shipped inventories ------------------------------------------------------------------------------

_TEMPLATE = re.compile(r"\{\{\s*(\w+)\s*\}\}")


def _load(path):
    return yaml.safe_load(path.read_text()) or {}


def _render(value, known):
    """Substitute the few plain ``{{ name }}`` templates of the shipped inventories (nothing else is templated)."""
    if isinstance(value, str):
        return _TEMPLATE.sub(lambda m: known[m.group(1)], value)
    if isinstance(value, dict):
        return {k: _render(v, known) for k, v in value.items()}
    if isinstance(value, list):
        return [_render(v, known) for v in value]
    return value


def shipped(inventory):
    """A shipped inventory's profiles, node inputs, fabric subnet and tensor-parallel group, as plan.yml reads them."""
    base = REPO / "inventories" / inventory
    group_vars = {}
    for path in sorted((base / "group_vars" / "all").glob("*.yml")):
        group_vars.update(_load(path))
    known = {"gb10_sim_subnet_base": "10.77.0"}  # sim.yml's default (SIM_SUBNET_BASE unset)
    if "gb10_sim_standin_repository" in group_vars:
        known["gb10_sim_standin_image"] = "{}@{}".format(
            group_vars["gb10_sim_standin_repository"], group_vars["gb10_sim_standin_placeholder_digest"]
        )
    if "gb10_sim_real_repository" in group_vars:
        # The 0.32.0 image and the 0.31.0 one (sim-real-031), both of that repository.
        for name in ("gb10_sim_real_image", "gb10_sim_real_prev_image"):
            known[name] = "{}@{}".format(
                group_vars["gb10_sim_real_repository"], group_vars["gb10_sim_standin_placeholder_digest"]
            )
    children = _load(base / "hosts.yml")["all"]["children"]
    hosts = list(children["gb10_nodes"]["hosts"])
    node_map = {}
    for host in hosts:
        hostvars = {k: v for k, v in group_vars.items() if k.startswith(("gb10_fabric_", "gb10_hf_", "memory_guard_"))}
        hostvars.update(_load(base / "host_vars" / f"{host}.yml"))
        node_map[host] = node_inputs.node_input(_render(hostvars, known))
    cidr = group_vars["gb10_fabric_cidr"].replace("{{ gb10_sim_subnet_base }}", known["gb10_sim_subnet_base"])
    defaults = {}
    for role in ("gb10", "proxy", "monitoring", "model_weights", "flashinfer_jit"):
        defaults.update(_load(REPO / "roles" / role / "defaults" / "main.yml"))
    given = {**defaults, **group_vars}
    variables = {
        "proxy_client": "gb10_proxy_port",
        "warm_agent": "gb10_warm_agent_port",
        "proxy_metrics": "gb10_proxy_metrics_port",
        "prometheus": "monitoring_prometheus_port",
        "node_exporter": "monitoring_node_exporter_port",
        "weights_fanout": "model_weights_fanout_port",
        "flashinfer_share": "flashinfer_jit_share_port",
    }
    exposure_site = {
        "proxies": list((children.get("gb10_proxy") or {}).get("hosts") or []),
        "monitoring": list((children.get("gb10_monitoring") or {}).get("hosts") or [])
        if given.get("monitoring_enabled")
        else [],
        "addresses": {host: node_map[host]["fabric_address"] for host in hosts},
        "ports": {host: {s: int(given[v]) for s, v in variables.items()} for host in hosts},
        "open": _render(given.get("gb10_fence_open") or [], known),
    }
    return {
        "profiles": _render(group_vars["serving_profiles"], known),
        "nodes": node_map,
        "fabric_cidr": cidr,
        "ray_head": next(iter(children["gb10_ray_head"]["hosts"])),
        "ray_workers": list(children["gb10_ray_workers"]["hosts"]),
        "site": exposure_site,
    }


def shipped_plan(inventory, profile):
    """``plan()`` of one of a shipped inventory's profiles (``sim``: ``sim-replicas``, ``sim-tp`` (launcher mp),
    ``sim-tp-ray``)."""
    site = shipped(inventory)
    return plan_mod.plan(
        profile,
        site["profiles"],
        site["nodes"],
        **{k: site[k] for k in ("fabric_cidr", "ray_head", "ray_workers", "site")},
    )
