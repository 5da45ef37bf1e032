# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The tensor-parallel group as vLLM runs it: one memory share for every rank, heads split over the ranks.

Only the head runs ``vllm serve``; the workers are Ray nodes that the head's engine drives, so whatever the
head's argv says (``--gpu-memory-utilization``, ``--max-num-seqs``) holds on every rank. The plan therefore
judges every rank's memory at the head's value and takes the group's KV tokens from its smallest rank (vLLM
sizes the KV cache by the rank with the fewest blocks). A per-node value on a worker is REFUSED, not folded
into the group's value: the inventory would still say that the worker runs at its own share, which is false,
and the plan refuses every other second source of truth too. The model's attention and KV heads, where the
profile states them, must split over the group's ranks as vLLM splits them. Pure functions over plain values;
``rules_tp.py`` turns their findings into violations.
"""

from __future__ import annotations

# Per-node settings that only reach vLLM through the head's argv (``vllm serve`` runs on the head alone).
HEAD_ONLY = {
    "gpu_memory_utilization": (
        "--gpu-memory-utilization",
        "the group runs one value on every rank (the head's, which a Ray group's vLLM applies to every rank and "
        "vLLM's own launch gives every rank's argv)",
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


def _count(value):
    """A head count as a positive int, or None when it is not one (bools are not counts)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return None
    return value


def stated_heads(attention):
    """``(num_heads, num_kv_heads, problems)`` from ``model.attention``; a count not stated is None.

    ``num_heads`` is config.json's ``num_attention_heads``, ``num_kv_heads`` its ``num_key_value_heads``.
    ``problems`` lists ``(field, text)`` for what is wrong with the stated figures: a count that is not one
    (field named), or query heads that are not whole groups of KV heads (field None).
    """
    attention = attention if isinstance(attention, dict) else {}
    problems = []
    counts = {}
    for field in ("num_heads", "num_kv_heads"):
        value = attention.get(field)
        if value is None:
            counts[field] = None
            continue
        counts[field] = _count(value)
        if counts[field] is None:
            problems.append((field, f"model.attention.{field} must be a positive whole number of heads, got {value!r}"))
    heads, kv_heads = counts["num_heads"], counts["num_kv_heads"]
    if heads and kv_heads and heads % kv_heads:
        problems.append(
            (
                None,
                f"model.attention.num_heads {heads} is not a multiple of num_kv_heads {kv_heads} (each KV head "
                "serves a whole group of query heads): copy num_attention_heads and num_key_value_heads from the "
                "snapshot's config.json",
            )
        )
    return heads, kv_heads, problems


def heads_fit(num_heads, num_kv_heads, size):
    """What vLLM refuses for heads split over ``size`` ranks: ``[]`` when it fits, else one line per problem.

    Attention heads must divide by the size (vLLM's ModelConfig check). KV heads are split when there are at
    least as many as ranks (they must divide by the size) and replicated when there are fewer (the size must
    then be a multiple of them), as vLLM's QKV projection does.
    """
    problems = []
    if num_heads and num_heads % size:
        problems.append(
            f"attention heads ({num_heads}) do not divide by the tensor-parallel size ({size}): vLLM refuses to "
            f"start with 'Total number of attention heads ({num_heads}) must be divisible by tensor parallel size "
            f"({size})'"
        )
    if num_kv_heads:
        if num_kv_heads >= size and num_kv_heads % size:
            problems.append(
                f"KV heads ({num_kv_heads}) do not divide by the tensor-parallel size ({size}): vLLM splits KV "
                "heads over the ranks and refuses an uneven split"
            )
        elif num_kv_heads < size and size % num_kv_heads:
            problems.append(
                f"the tensor-parallel size ({size}) is not a multiple of the KV heads ({num_kv_heads}): with fewer "
                "KV heads than ranks vLLM replicates each KV head over a whole number of ranks"
            )
    return problems


def fitting_sizes(num_heads, num_kv_heads, most):
    """Tensor-parallel sizes from 2 to ``most`` over which the stated heads split."""
    return [size for size in range(2, most + 1) if not heads_fit(num_heads, num_kv_heads, size)]


def heads_summary(attention, topology, size):
    """What the plan reports about the stated heads (``checked`` False when the profile states none: the plan
    runs offline and cannot read the snapshot's config.json)."""
    heads, kv_heads, problems = stated_heads(attention)
    summary = {
        "num_heads": heads,
        "num_kv_heads": kv_heads,
        "tensor_parallel_size": size,
        "checked": False,
        "fit": None,
    }
    if topology != "tensor_parallel" or size < 2 or (heads is None and kv_heads is None) or problems:
        return summary
    summary["checked"] = True
    summary["fit"] = not heads_fit(heads, kv_heads, size)
    return summary
