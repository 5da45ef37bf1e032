"""get_cutlass_fused_moe_module as in flashinfer 0.6.18 fused_moe/core.py: backend -> generator -> build_and_load."""

import functools

from ..jit import fused_moe as gen


@functools.cache
def get_cutlass_fused_moe_module(backend="100", use_fast_build=False):
    if backend in ("120", "121"):
        return gen.gen_cutlass_fused_moe_sm120_module(use_fast_build).build_and_load()
    if backend == "103":
        return gen.gen_cutlass_fused_moe_sm103_module(use_fast_build).build_and_load()
    if backend in ("100", "107", "110"):
        return gen.gen_cutlass_fused_moe_sm100_module(use_fast_build).build_and_load()
    if backend == "90":
        return gen.gen_cutlass_fused_moe_sm90_module(use_fast_build).build_and_load()
    if backend == "89":
        return gen.gen_cutlass_fused_moe_sm89_module(use_fast_build).build_and_load()
    raise ValueError(f"Invalid backend: {backend}")
