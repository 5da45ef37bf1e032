# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Memory arithmetic of one GB10 node (unified memory: every GPU byte is a host byte).

Pure functions over plain numbers, in GiB unless a name says otherwise.
"""

from __future__ import annotations

import math
import re

GIB = 1024**3
MIB_PER_GIB = 1024

_SIZE_RE = re.compile(r"^(?P<num>[0-9]+(?:\.[0-9]+)?)(?P<suffix>[kKmMgGtT])?\Z")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_bytes(value):
    """Bytes from an int or a size the way vLLM's ``human_readable_int`` reads it.

    Lower-case suffixes are decimal (``6g`` = 6e9), upper-case are binary (``6G`` = 6 GiB); a binary suffix
    takes no decimals (vLLM refuses ``1.5G``).
    """
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        return value
    match = _SIZE_RE.match(str(value).strip())
    if not match:
        raise ValueError(f"not a size: {value!r}")
    number, suffix = match.group("num"), match.group("suffix")
    if suffix is None:
        if "." in number:
            raise ValueError(f"not a whole number of bytes: {value!r}")
        return int(number)
    if suffix in _DECIMAL:
        return int(float(number) * _DECIMAL[suffix])
    if "." in number:
        raise ValueError(f"vLLM takes no decimals with the binary suffix {suffix}: {value!r}")
    return int(number) * _BINARY[suffix]


def kv_bytes_per_token(attention, kv_dtype_bytes, tensor_parallel_size):
    """Bytes of KV cache one token costs on ONE rank, or None where the profile gives no attention shape.

    ``attention`` is either ``{"kv_bytes_per_token": n}`` (a measured figure, already per rank) or a shape:
    ``{"kind": "gqa", "num_layers", "num_kv_heads", "head_dim"}`` (K and V per KV head, heads split over TP)
    or ``{"kind": "mla", "num_layers", "kv_lora_rank", "qk_rope_head_dim"}`` (one latent, replicated per rank).
    """
    if not attention:
        return None
    if attention.get("kv_bytes_per_token"):
        return int(attention["kv_bytes_per_token"])
    kind = attention.get("kind", "gqa")
    layers = int(attention["num_layers"])
    if kind == "mla":
        return layers * (int(attention["kv_lora_rank"]) + int(attention.get("qk_rope_head_dim", 0))) * kv_dtype_bytes
    heads = max(1, math.ceil(int(attention["num_kv_heads"]) / max(1, tensor_parallel_size)))
    return 2 * layers * heads * int(attention["head_dim"]) * kv_dtype_bytes


def max_share(mem_available_gib, other_work_reserve_gib, margin_gib, mem_total_gib):
    """Largest gpu-memory share (2 decimals, rounded down) that keeps the headroom at the margin."""
    if mem_total_gib <= 0:
        return 0.0
    share = (mem_available_gib - other_work_reserve_gib - margin_gib) / mem_total_gib
    return max(0.0, math.floor(share * 100) / 100)


def node_table(
    *,
    mem_total_gib,
    mem_available_gib,
    gpu_memory_utilization,
    weights_gib,
    drafter_gib,
    activation_reserve_gib,
    other_work_reserve_gib,
    kv_cache_bytes=None,
    kv_token_bytes=None,
    context_length=None,
    shm_gib=0.0,
    margin_gib=0.0,
):
    """The memory table of one node.

    budget   = share x MemTotal (what vLLM takes from unified memory)
    kv_cache = budget - resident weights - drafter - activation reserve (or the explicit
               --kv-cache-memory-bytes, which must fit in that remainder)
    shm      = the engine container's private /dev/shm (a tmpfs carved from the same unified memory; 0 where the
               container uses the host's IPC namespace)
    headroom = measured MemAvailable - other work's reserve - budget - shm (what the host keeps)
    start_need = budget + shm + other work's reserve + margin: the MemAvailable an engine start (or a watchdog's
               restart) is admitted with (issue 39, item 2; ``_admission.py``)
    """
    budget = gpu_memory_utilization * mem_total_gib
    kv_room = budget - weights_gib - drafter_gib - activation_reserve_gib
    kv_cache = kv_room if kv_cache_bytes is None else kv_cache_bytes / GIB
    table = {
        "mem_total_gib": round(mem_total_gib, 2),
        "mem_available_gib": round(mem_available_gib, 2),
        "gpu_memory_utilization": gpu_memory_utilization,
        "budget_gib": round(budget, 2),
        "weights_gib": round(weights_gib, 2),
        "drafter_gib": round(drafter_gib, 2),
        "activation_reserve_gib": round(activation_reserve_gib, 2),
        "kv_room_gib": round(kv_room, 2),
        "kv_cache_gib": round(kv_cache, 2),
        "kv_cache_source": "computed" if kv_cache_bytes is None else "--kv-cache-memory-bytes",
        "other_work_reserve_gib": round(other_work_reserve_gib, 2),
        "shm_gib": round(shm_gib, 2),
        "headroom_gib": round(mem_available_gib - other_work_reserve_gib - budget - shm_gib, 2),
        "start_need_gib": round(budget + shm_gib + other_work_reserve_gib + margin_gib, 2),
        "kv_tokens": None,
        "requests_at_full_context": None,
    }
    if kv_token_bytes and kv_cache > 0:
        tokens = int(kv_cache * GIB // kv_token_bytes)
        table["kv_tokens"] = tokens
        if context_length:
            table["requests_at_full_context"] = round(tokens / context_length, 2)
    return table
