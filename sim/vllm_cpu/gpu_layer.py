#!/usr/bin/env python
# Copyright: gb10.serving maintainers
# Apache-2.0
"""`vllm` of the real-engine sim image: the one GPU-only step of a GB10 start, then the real vLLM CLI, unchanged.

On a GB10, vLLM's first MoE forward (the KV-cache profiling pass, weights resident) asks FlashInfer for its CUTLASS
fused-MoE module, ``flashinfer.fused_moe.core.get_cutlass_fused_moe_module("121")``, and FlashInfer builds it with
ninja unless ``$FLASHINFER_WORKSPACE_BASE`` (the node's cache, mounted by the serving unit) holds it (seed 004). vLLM's
CPU build never takes that path, so this layer makes the same call on the FlashInfer stand-in before `vllm serve`
starts, for a MoE model only: a start with the module missing compiles real units with gcc at MAX_JOBS, a start with
it prebuilt (roles/flashinfer_jit) loads it. Then vLLM's own CLI main runs (vllm_cpu_entry.py) with the argv as given.

Where it departs from a GB10: the build runs before the weights load rather than during profiling, so its memory
peak never meets the model's; GPU memory accounting is not simulated (the CPU build sizes its KV pool from
VLLM_CPU_KVCACHE_SPACE and refuses a --max-model-len the pool cannot hold, in its own words).
Environment: GB10_SIM_GPU_CAPABILITY (12.1, a GB10's), FLASHINFER_WORKSPACE_BASE and MAX_JOBS as on a GB10.
"""

import json
import os
import runpy
import sys
import time

ENTRY = "/opt/gb10/vllm_cpu_entry.py"
# FlashInfer's generator per backend (flashinfer/jit/fused_moe.py); 12.x shares sm120's.
GENERATORS = {"120": "sm120", "121": "sm120", "103": "sm103", "100": "sm100", "90": "sm90", "89": "sm89"}
EXPERT_KEYS = ("num_local_experts", "n_routed_experts", "num_experts")


def log(message):
    print(f"INFO {time.strftime('%m-%d %H:%M:%S')} [gpu_layer.py] {message}", file=sys.stderr, flush=True)


def served_model_dir(argv):
    """The positional model of `vllm serve MODEL ...` (the plan passes the snapshot path), or None."""
    if len(argv) >= 2 and argv[0] == "serve" and not argv[1].startswith("-"):
        return argv[1]
    return None


def routes_over_experts(model_dir):
    """True for a config.json whose layers route over more than one expert (Mixtral, DeepSeek, Qwen MoE)."""
    try:
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as handle:
            config = json.load(handle)
    except (OSError, ValueError):
        return False
    for key in EXPERT_KEYS:
        try:
            if int(config.get(key) or 0) > 1:
                return True
        except (TypeError, ValueError):
            continue
    return False


def fused_moe_module(capability):
    """Build or load FlashInfer's CUTLASS fused-MoE module for `capability` ("12.1"), as vLLM's MoE path asks."""
    major, _dot, minor = capability.partition(".")
    backend = f"{int(major) * 10 + int(minor or 0)}"
    # flashinfer.jit.env fixes its cache folders and arch list at import: set the arch first.
    os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", capability)
    from flashinfer.fused_moe.core import get_cutlass_fused_moe_module
    from flashinfer.jit import fused_moe as jit_fused_moe

    spec = getattr(jit_fused_moe, f"gen_cutlass_fused_moe_{GENERATORS.get(backend, 'sm100')}_module")()
    library = str(spec.jit_library_path)
    cached = os.path.exists(library)
    if not cached:
        log(
            f"FlashInfer JIT: {spec.name} is not in the cache {spec.build_dir}: building {len(spec.sources)} units "
            f"with MAX_JOBS={os.environ.get('MAX_JOBS')} (this start is slow; the cache keeps it for the next one)"
        )
    started = time.monotonic()
    get_cutlass_fused_moe_module(backend)
    log(
        f"FlashInfer JIT: {spec.name} {'loaded from the cache' if cached else 'built'} in "
        f"{time.monotonic() - started:.1f} s ({library})"
    )


if __name__ == "__main__":
    model = served_model_dir(sys.argv[1:])
    if model and routes_over_experts(model):
        fused_moe_module(os.environ.get("GB10_SIM_GPU_CAPABILITY", "12.1"))
    sys.argv = [ENTRY, *sys.argv[1:]]
    runpy.run_path(ENTRY, run_name="__main__")
