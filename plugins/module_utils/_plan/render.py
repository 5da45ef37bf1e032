# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The plan as readable text: one block per node (argv, env, Ray, memory table), the group, the violations."""

from __future__ import annotations

from .argv import shell_word
from .exposure import format_exposure
from .violation import line

_MEMORY_ROWS = (
    ("mem_total_gib", "MemTotal", "GiB"),
    ("mem_available_gib", "MemAvailable", "GiB"),
    ("gpu_memory_utilization", "gpu-memory share", ""),
    ("budget_gib", "vLLM budget (share x total)", "GiB"),
    ("weights_gib", "- resident weights", "GiB"),
    ("drafter_gib", "- drafter", "GiB"),
    ("activation_reserve_gib", "- activation reserve", "GiB"),
    ("kv_cache_gib", "= KV cache", "GiB"),
    ("kv_tokens", "KV tokens", ""),
    ("requests_at_full_context", "requests at full context", ""),
    ("other_work_reserve_gib", "other work reserve", "GiB"),
    ("shm_gib", "engine /dev/shm", "GiB"),
    ("headroom_gib", "host headroom (avail-other-budget-shm)", "GiB"),
    ("margin_gib", "required margin", "GiB"),
    ("start_need_gib", "a start needs MemAvailable >=", "GiB"),
)


def fmt(value):
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _group_lines(group, size):
    """The tensor-parallel group's block: what vLLM runs every rank at."""
    lines = [
        f"== tensor-parallel group ({size} ranks; the head's vllm serve drives them all)",
        "gpu-memory share on every rank: {} (from {}; vLLM applies the head's --gpu-memory-utilization to every "
        "rank, so every rank is judged at it)".format(fmt(group.get("gpu_memory_utilization")), group.get("set_by")),
    ]
    if group.get("kv_tokens") is not None:
        lines.append(
            "KV tokens of the group: {} ({}; vLLM sizes the cache by the rank with the fewest blocks){}".format(
                group["kv_tokens"],
                "the smallest rank's, " + group["kv_tokens_ranks"][0]
                if len(group["kv_tokens_ranks"]) == 1
                else "the same on " + ", ".join(group["kv_tokens_ranks"]),
                ""
                if group.get("requests_at_full_context") is None
                else "; {} requests at full context".format(fmt(group["requests_at_full_context"])),
            )
        )
    if group.get("tightest_node") is not None:
        lines.append(f"tightest headroom: {group['tightest_node']} {fmt(group['headroom_gib'])} GiB")
    heads = group.get("heads") or {}
    if heads.get("checked"):
        stated = ", ".join(
            f"{count} {label}"
            for count, label in ((heads.get("num_heads"), "attention heads"), (heads.get("num_kv_heads"), "KV heads"))
            if count is not None
        )
        verdict = "they split over the ranks" if heads.get("fit") else "they do NOT split: see tp_heads_divisible"
        lines.append(f"heads: {stated} over {size} ranks (checked: {verdict})")
    else:
        lines.append(
            f"heads: not checked against {size} ranks (state model.attention.num_heads and num_kv_heads from the "
            "snapshot's config.json: num_attention_heads, num_key_value_heads)"
        )
    return lines


def api_line(api):
    """The plan's line on the public frontend: who may use it, over what."""
    where = f"proxy {api.get('bind', '*')}:{api.get('port', 8080)} {'https' if api.get('tls') else 'http'}"
    if api.get("anonymous"):
        return (
            f"api: {where}, ANONYMOUS (proxy_anonymous: true): anyone who reaches it uses the model; /v1/* and /health"
        )
    if api.get("key_set"):
        return f"api: {where}, key required (Authorization: Bearer gb10_api_key) on /v1/*; /health open; nothing else"
    return f"api: {where}, NO KEY SET (gb10_api_key empty)"


def affinity_line(api):
    """The plan's line on session affinity, where it is on."""
    affinity = api.get("affinity") or {}
    mode = affinity.get("mode", "none")
    if mode == "none":
        return None
    key = f"header {affinity.get('header')}" + (", else the body's user field" if mode == "user" else "")
    return (
        f"api affinity: {mode}: a request with {key} goes to its session's replica (consistent hash, no replica "
        f"above {affinity.get('balance_factor')}% of the average); without it, least connections"
    )


def api_client_line(api):
    """The plan's line on what the collection's clients use for the proxy: its URL, how its certificate is checked."""
    if not api.get("url"):
        return None
    if not api.get("tls"):
        how = "plain HTTP: no proxy_tls_cert"
    elif api.get("ca"):
        how = f"certificate verified against proxy_tls_ca {api['ca']}"
    else:
        how = "certificate verified against the system's trust store (no proxy_tls_ca)"
    return f"api url: {api['url']} ({how})"


def vllm_catalog_line(catalog):
    """What the vllm_options were checked against: the collection's catalog, the image's, or nothing yet."""
    if not catalog or not catalog.get("source"):
        return ""
    version = catalog.get("version")
    if catalog["source"] == "pending":
        return (
            f"vllm_options NOT checked yet: the collection has no option catalog of vLLM {version}; site.yml's "
            "serving-image gate builds it from the gated image's own parser on the node and plans again before any "
            "unit changes (roles/serving_image)"
        )
    if catalog["source"] == "collection":
        return f"vllm_options checked against vLLM {version}'s own parser (the collection's catalog)"
    origin = f", built from {catalog['generated_from']}" if catalog.get("generated_from") else ""
    return (
        f"vllm_options checked against vLLM {version}'s own parser (the image's catalog {catalog.get('path')}{origin})"
    )


def fabric_lines(fabric, nccl):
    """The plan's lines on a tensor-parallel group's fabric and NCCL (issue 39 items 3-4); none in replicas.

    The bandwidth is measured on the nodes, not here: the plan states the floor and where the figures are printed."""
    lines = []
    if fabric:
        mtu = f"MTU {fabric['mtu']} on every rank" if fabric.get("mtu") else "one MTU on every rank (none stated)"
        lines.append(
            "fabric: {}, checked by node_preflight; bandwidth floor {:g} Gbit/s from each rank to {} (iperf3, one TCP "
            "stream, {} s), measured before the group's units start by roles/serving (tasks/fabric.yml), which prints "
            "'fabric bandwidth: <rank> -> {}: <Gbit/s> (floor {:g} Gbit/s)' and refuses a rank below it".format(
                mtu,
                fabric["bandwidth_floor_gbit"],
                fabric["head"],
                fabric["measure_seconds"],
                fabric["head"],
                fabric["bandwidth_floor_gbit"],
            )
        )
    if nccl:
        lines.append(
            "nccl: one build on every rank ({}); minimum {} ({}), {}; each rank's image's NCCL read and recorded by "
            "roles/serving_image (gb10_gated_image_file, printed by playbooks/status.yml)".format(
                ", ".join(nccl["ranks"]),
                nccl["min_version"],
                nccl["min_source"],
                "held: CUDA graphs span the nodes"
                if nccl["cuda_graphs"]
                else "not held: no CUDA graphs (enforce-eager or cudagraph_mode NONE)",
            )
        )
    return lines


def format_plan(result):
    """The plan as readable text: one block per node (argv, env, Ray, memory table), then the violations."""
    lines = [
        f"profile {result['profile']}: topology {result['topology']}, "
        f"tensor-parallel size {result.get('tensor_parallel_size')}",
        f"image {result.get('image')} (vLLM {result.get('vllm_version')})",
    ]
    catalog_line = vllm_catalog_line(result.get("vllm_catalog"))
    if catalog_line:
        lines.append(catalog_line)
    if result.get("bind_all_interfaces"):
        lines.append("listen: vLLM binds 0.0.0.0, every interface of every node (bind_all_interfaces: true)")
    if result.get("api"):
        lines.append(api_line(result["api"]))
        affinity = affinity_line(result["api"])
        if affinity:
            lines.append(affinity)
        client = api_client_line(result["api"])
        if client:
            lines.append(client)
    fence = result.get("ray")
    if fence:
        ports = fence["ports"]
        lines.append(
            "ray fence: auth {} ({}), firewall {} (peers {}), ports fixed (gcs {}, workers {}-{}), no dashboard".format(
                fence["auth"],
                "RAY_AUTH_MODE=token, the token in the serving role's root-only ray.env"
                if fence["auth"] == "token"
                else "NONE: anyone who reaches Ray's ports runs code",
                "on" if fence["firewall"] else "OFF",
                ", ".join(fence["peers"]) or "none",
                ports["gcs"],
                ports["min_worker"],
                ports["max_worker"],
            )
        )
    launch = result.get("mp")
    if launch:
        fence = result.get("fence") or {}
        low, high = launch["ephemeral_ports"]
        lines.append(
            "mp launch: vLLM's own multi-node launch, master {}:{}; firewall {} (peers {}: the master port and the "
            "ephemeral range {}-{} where torch.distributed, gloo, NCCL and vLLM's queues bind)".format(
                launch["master_address"],
                launch["master_port"],
                "on" if launch["firewall"] else "OFF",
                ", ".join(fence.get("peers") or []) or "none",
                low,
                high,
            )
        )
    lines.extend(fabric_lines(result.get("fabric"), result.get("nccl")))
    if result.get("exposure") is not None:
        lines.extend(format_exposure(result["exposure"], result.get("exposure_names") or {}))
    for host, entry in sorted(result["nodes"].items()):
        lines.append("")
        lines.append(f"== {host} ({entry['role']})")
        if entry.get("argv"):
            lines.append("argv: " + " ".join(shell_word(w) for w in entry["argv"]))
        else:
            lines.append("argv: (none: the head's vllm serve drives this node through Ray)")
        if entry.get("ray_start"):
            lines.append("ray:  " + " ".join(entry["ray_start"]))
        lines.append("snapshot: " + str(entry.get("snapshot_path")))
        # what engine.env holds (container_env: the cache paths the containers mount included), not only the part
        # the profile and the plan's rules set
        lines.append("env:")
        lines.extend(f"  {key}={value}" for key, value in (entry.get("container_env") or entry.get("env", {})).items())
        memory = entry.get("memory") or {}
        if memory:
            lines.append("memory:")
            for key, label, unit in _MEMORY_ROWS:
                value = memory.get(key)
                if value is None:
                    continue
                lines.append(f"  {label:<40} {fmt(value):>12} {unit}".rstrip())
        sources = entry.get("facts_source") or {}
        if sources:
            lines.append("figures: " + ", ".join(f"{k} from {v}" for k, v in sorted(sources.items())))
    group = result.get("group")
    if group:
        lines.append("")
        lines.extend(_group_lines(group, result.get("tensor_parallel_size")))
    lines.append("")
    violations = result.get("violations") or []
    if violations:
        lines.append(f"VIOLATIONS ({len(violations)}):")
        lines.extend(line(v) for v in violations)
    else:
        lines.append("no violations")
    return "\n".join(lines)
