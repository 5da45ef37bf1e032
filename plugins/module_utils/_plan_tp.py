# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The tensor-parallel group as vLLM runs it: one memory share for every rank.

Only the head runs ``vllm serve``; the workers are Ray nodes that the head's engine drives, so whatever the
head's argv says (``--gpu-memory-utilization``, ``--max-num-seqs``) holds on every rank. The plan therefore
judges every rank's memory at the head's value and takes the group's KV tokens from its smallest rank (vLLM
sizes the KV cache by the rank with the fewest blocks). A per-node value on a worker is REFUSED, not folded
into the group's value: the inventory would still say that the worker runs at its own share, which is false,
and the plan refuses every other second source of truth too. Pure functions over plain values; the plan
(``_plan.py``) turns their findings into violations.
"""

from __future__ import annotations

# Per-node settings that only reach vLLM through the head's argv (``vllm serve`` runs on the head alone).
HEAD_ONLY = {
    "gpu_memory_utilization": (
        "--gpu-memory-utilization",
        "vLLM applies the head's value to every rank",
    ),
    "max_num_seqs": ("--max-num-seqs", "the head's scheduler batches for the whole group"),
}


def group_setting(profile, head, key, default=None):
    """(value, where it is set) of a head-only setting: ``nodes.<head>.<key>``, else ``defaults.<key>``."""
    head_value = ((profile.get("nodes") or {}).get(head) or {}).get(key) if head else None
    if head_value is not None:
        return head_value, f"nodes.{head}.{key}"
    value = (profile.get("defaults") or {}).get(key)
    if value is not None:
        return value, f"defaults.{key}"
    return default, f"defaults.{key}"


def worker_values(profile, workers):
    """``[(worker, key, value)]``: per-node values on Ray workers that vLLM never reads (sorted)."""
    found = []
    per_node = profile.get("nodes") or {}
    for worker in sorted(workers):
        settings = per_node.get(worker) or {}
        for key in sorted(HEAD_ONLY):
            if settings.get(key) is not None:
                found.append((worker, key, settings[key]))
    return found


def group_max_share(ranks):
    """The largest share that keeps EVERY rank at its margin: the minimum of the ranks' own limits (or None).

    ``ranks``: ``{host: largest share that host passes at}``. The tighter node is the real budget.
    """
    if not ranks:
        return None
    return min(ranks.values())


def group_memory(tables, share, set_by, context_length=None):
    """The group's memory summary from the ranks' memory tables (``{host: table}``; ranks without one are left
    out): the one share, the smallest rank's KV cache and tokens (what vLLM serves with), the tightest headroom.
    """
    summary = {
        "gpu_memory_utilization": share,
        "set_by": set_by,
        "ranks_judged": sorted(tables),
        "kv_cache_gib": None,
        "kv_tokens": None,
        "kv_tokens_ranks": [],
        "requests_at_full_context": None,
        "tightest_node": None,
        "headroom_gib": None,
    }
    if not tables:
        return summary
    smallest = min(sorted(tables), key=lambda host: tables[host]["kv_cache_gib"])
    summary["kv_cache_gib"] = tables[smallest]["kv_cache_gib"]
    with_tokens = [host for host in sorted(tables) if tables[host].get("kv_tokens") is not None]
    if with_tokens and len(with_tokens) == len(tables):
        fewest = min(tables[host]["kv_tokens"] for host in with_tokens)
        summary["kv_tokens"] = fewest
        summary["kv_tokens_ranks"] = [host for host in with_tokens if tables[host]["kv_tokens"] == fewest]
        if context_length:
            summary["requests_at_full_context"] = round(summary["kv_tokens"] / context_length, 2)
    tightest = min(sorted(tables), key=lambda host: tables[host]["headroom_gib"])
    summary["tightest_node"] = tightest
    summary["headroom_gib"] = tables[tightest]["headroom_gib"]
    return summary
