"""The stand-in's KV cache: sized from the (fake) GPU as vLLM 0.32 sizes it, refused like vLLM when too small.

vLLM's worker takes ``--gpu-memory-utilization`` x the GPU's total memory, subtracts what is not KV cache (the
weights it loaded and the activation peak of its profiling pass) and gives the rest to the KV cache, unless
``--kv-cache-memory-bytes`` names the size; ``check_enough_kv_cache_memory`` then refuses to start when one request
of ``--max-model-len`` tokens does not fit (vllm/v1/core/kv_cache_utils.py, whose words are copied below).

The fake GPU (environment): GB10_STANDIN_GPU_MEMORY_MIB (124608, a GB10's unified memory) and
GB10_STANDIN_GPU_CAPABILITY (12.1). GB10_STANDIN_MEMORY_SCALE (1) makes the simulated GPU that many times smaller
(total memory and activation peak), while the weights and the KV cost per token stay the real ones of the snapshot:
a tiny model on a GPU scaled down meets its KV limit at a context a simulation can climb to, as a large model does on
a real GB10. GB10_STANDIN_ACTIVATION_MIB (1024) is the profiling pass's activation peak before scaling.

What the stand-in keeps resident grows with the context it is started with: the part of the KV pool that
``--max-num-seqs`` requests at ``--max-model-len`` fill (never more than the pool), allocated and every page written,
capped by GB10_STANDIN_KV_RESIDENT_LIMIT_MIB (256) so a simulation stays small. Real vLLM reserves the whole pool.
"""

from __future__ import annotations

import json
import math
import os

GIB = 1 << 30
MIB = 1 << 20
BLOCK_SIZE = 16
PAGE = 4096
GB10_MEMORY_MIB = 124608
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}
KV_DTYPE_BYTES = {"fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "fp8_inc": 1, "bfloat16": 2, "float16": 2, "half": 2}
DOCS = "https://docs.vllm.ai/en/latest/configuration/conserving_memory/"


class KVCacheError(ValueError):
    """vLLM's refusal to start: the KV cache cannot hold one request of max_model_len."""


def format_gib(value):
    # vllm.utils.mem_utils.format_gib
    return f"{round(value / GIB, 2)}"


def _env_float(env, name, default):
    try:
        return float(env.get(name, default))
    except (TypeError, ValueError):
        return float(default)


def fake_gpu(env=None):
    """{"total_bytes", "capability", "scale", "activation_bytes"} of the GPU the stand-in pretends to have."""
    env = os.environ if env is None else env
    scale = max(1.0, _env_float(env, "GB10_STANDIN_MEMORY_SCALE", 1))
    major, _dot, minor = str(env.get("GB10_STANDIN_GPU_CAPABILITY", "12.1")).partition(".")
    return {
        "total_bytes": int(_env_float(env, "GB10_STANDIN_GPU_MEMORY_MIB", GB10_MEMORY_MIB) * MIB / scale),
        "capability": (int(major), int(minor or 0)),
        "scale": scale,
        "activation_bytes": int(_env_float(env, "GB10_STANDIN_ACTIVATION_MIB", 1024) * MIB / scale),
    }


def read_config(model_path):
    """The snapshot's config.json as a dict ({} when it cannot be read)."""
    try:
        with open(os.path.join(str(model_path), "config.json"), encoding="utf-8") as handle:
            found = json.load(handle)
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def kv_bytes_per_token(hf_config, kv_cache_dtype=None, tensor_parallel_size=1):
    """K and V of every layer for one token on one rank, or None when config.json gives no attention shape."""
    try:
        layers = int(hf_config["num_hidden_layers"])
        heads = int(hf_config.get("num_key_value_heads") or hf_config["num_attention_heads"])
        head_dim = int(
            hf_config.get("head_dim") or int(hf_config["hidden_size"]) // int(hf_config["num_attention_heads"])
        )
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    if kv_cache_dtype and kv_cache_dtype != "auto":
        size = KV_DTYPE_BYTES.get(str(kv_cache_dtype), 2)
    else:
        size = DTYPE_BYTES.get(str(hf_config.get("torch_dtype") or hf_config.get("dtype") or "bfloat16"), 2)
    heads_per_rank = max(1, math.ceil(heads / max(1, int(tensor_parallel_size))))
    return 2 * layers * heads_per_rank * head_dim * size


def needed_bytes(max_model_len, per_token):
    """FullAttentionSpec.max_memory_usage_bytes: whole blocks for one request of max_model_len."""
    return math.ceil(max_model_len / BLOCK_SIZE) * BLOCK_SIZE * per_token


def estimate_max_model_len(available, per_token):
    """The longest max_model_len whose blocks fit (vLLM binary-searches the same thing)."""
    if available <= 0 or per_token <= 0:
        return 0
    return (available // (BLOCK_SIZE * per_token)) * BLOCK_SIZE


def size_kv_cache(
    *,
    gpu,
    gpu_memory_utilization,
    weights_bytes,
    max_model_len,
    per_token,
    max_num_seqs,
    kv_cache_memory_bytes=None,
    resident_limit_bytes=256 * MIB,
):
    """The KV cache vLLM would make, or KVCacheError with vLLM's own words.

    Returns {"requested", "available", "needed", "blocks", "tokens", "concurrency", "resident"} in bytes/tokens.
    """
    requested = int(gpu_memory_utilization * gpu["total_bytes"])
    if kv_cache_memory_bytes is not None:
        available = int(kv_cache_memory_bytes)
    else:
        available = requested - int(weights_bytes) - gpu["activation_bytes"]
    if available <= 0:
        raise KVCacheError(
            "No available memory for the cache blocks. "
            "Try increasing `gpu_memory_utilization` when initializing the engine "
            "(this flag also controls CPU memory reservation on the CPU "
            "backend, despite its name). "
            f"See {DOCS} for more details."
        )
    block_bytes = BLOCK_SIZE * per_token
    # BlockPool permanently holds back one null block; vLLM checks against the rest.
    usable = available - block_bytes
    needed = needed_bytes(max_model_len, per_token)
    if needed > usable:
        estimated = estimate_max_model_len(usable, per_token)
        estimated_msg = (
            f"Based on the available memory, the estimated maximum model length is {estimated}. "
            if estimated > 0
            else ""
        )
        raise KVCacheError(
            f"To serve at least one request with the model's max seq len "
            f"({max_model_len}), ({format_gib(needed)} GiB KV "
            f"cache is needed, which is larger than the available KV cache "
            f"memory ({format_gib(usable)} GiB). {estimated_msg}"
            f"Try increasing `gpu_memory_utilization` (which also controls "
            f"CPU memory on the CPU backend) or decreasing `max_model_len` "
            f"when initializing the engine. "
            f"See {DOCS} for more details."
        )
    blocks = available // block_bytes
    tokens = (blocks - 1) * BLOCK_SIZE
    pool = blocks * block_bytes
    resident = min(pool, int(max_num_seqs) * needed, int(resident_limit_bytes))
    return {
        "requested": requested,
        "available": available,
        "needed": needed,
        "blocks": blocks,
        "tokens": tokens,
        "concurrency": tokens / max_model_len,
        "resident": resident,
    }


def touch(nbytes):
    """Allocate ``nbytes`` and write every page, so the memory is resident (what the node's MemAvailable sees)."""
    buffer = bytearray(int(nbytes))
    for offset in range(0, len(buffer), PAGE):
        buffer[offset] = 1
    return buffer


def log_lines(kv, max_model_len):
    """vLLM's lines about the KV cache it made (gpu_worker.py and kv_cache_utils.py)."""
    return [
        ("gpu_worker.py:760", f"Available KV cache memory: {format_gib(kv['available'])} GiB"),
        (
            "kv_cache_utils.py:2328",
            f"GPU KV cache size: {kv['tokens']:,} tokens, Maximum concurrency for {max_model_len:,} tokens per "
            f"request: {kv['concurrency']:.2f}x",
        ),
    ]
