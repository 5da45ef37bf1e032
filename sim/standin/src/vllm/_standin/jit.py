"""FlashInfer's CUTLASS fused-MoE module at profiling time, as vLLM's flashinfer_cutlass MoE path asks for it.

vLLM's first MoE forward (the KV-cache profiling pass, weights resident) calls
``flashinfer.fused_moe.core.get_cutlass_fused_moe_module(str(major * 10 + minor))``. FlashInfer builds it with ninja
into ``$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/<version>/<arch>/cached_ops/`` unless that cache (mounted from
the node by the serving unit) already holds it, in which case ninja has nothing to do (seed 004: the CUTLASS saga).
The stand-in makes the same call on its FlashInfer stand-in, which compiles real units with gcc at MAX_JOBS: a
start with the module missing is slow, a start with it cached is not. The arch comes from the fake GPU
(memory.fake_gpu), given to FlashInfer as FLASHINFER_CUDA_ARCH_LIST since there is no GPU for it to ask.
"""

from __future__ import annotations

import os
import time


def is_moe(hf_config):
    """A model whose layers route over experts (Mixtral-style num_local_experts, or n_routed_experts)."""
    for key in ("num_local_experts", "n_routed_experts", "num_experts"):
        try:
            if int(hf_config.get(key) or 0) > 1:
                return True
        except (TypeError, ValueError):
            continue
    return False


def arch_list(capability):
    major, minor = capability
    return f"{major}.{minor}"


def library_state(path):
    """(exists, mtime_ns) of the module's .so: a rebuild changes it, a cached load does not."""
    try:
        return True, os.stat(path).st_mtime_ns
    except OSError:
        return False, None


def ensure_fused_moe(capability, log, env=None):
    """Build or load the fused-MoE module for ``capability``; return {"module", "library", "built", "seconds"}.

    ``env`` (default os.environ) gets FLASHINFER_CUDA_ARCH_LIST before flashinfer is imported, because
    flashinfer.jit.env fixes its cache folders at import.
    """
    env = os.environ if env is None else env
    env.setdefault("FLASHINFER_CUDA_ARCH_LIST", arch_list(capability))
    from flashinfer.fused_moe.core import get_cutlass_fused_moe_module
    from flashinfer.jit import fused_moe as jit_fused_moe

    backend = f"{capability[0] * 10 + capability[1]}"
    generator = {"120": "sm120", "121": "sm120", "103": "sm103", "100": "sm100", "90": "sm90", "89": "sm89"}
    spec = getattr(jit_fused_moe, f"gen_cutlass_fused_moe_{generator.get(backend, 'sm100')}_module")()
    library = str(spec.jit_library_path)
    before = library_state(library)
    if not before[0]:
        log(
            f"FlashInfer JIT: {spec.name} is not in the cache {spec.build_dir}: building {len(spec.sources)} units "
            f"with MAX_JOBS={env.get('MAX_JOBS')} (this start is slow; the cache keeps it for the next one)"
        )
    started = time.monotonic()
    get_cutlass_fused_moe_module(backend)
    seconds = time.monotonic() - started
    built = library_state(library) != before
    log(f"FlashInfer JIT: {spec.name} {'built' if built else 'loaded from the cache'} in {seconds:.1f} s ({library})")
    return {"module": spec.name, "library": library, "built": built, "seconds": round(seconds, 2)}
