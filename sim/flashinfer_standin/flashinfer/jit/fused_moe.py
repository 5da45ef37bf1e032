"""The CUTLASS fused-MoE generators of flashinfer 0.6.18, with their module names; units are small generated C files.

GB10_STANDIN_MOE_UNITS (default 24) sets how many units; GB10_STANDIN_UNIT_WORK (default 400) how heavy each is
(functions per unit), so a build takes measurable compiler time and memory at the given MAX_JOBS.
"""

import os

from . import env as jit_env
from .core import gen_jit_spec
from .utils import write_if_different

_UNIT = """/* generated CUTLASS-instantiation stand-in {index} for sm{arch} */
{functions}
double fused_moe_unit_{index}(double x) {{
    double acc = 0.0;
{calls}
    return acc;
}}
"""


def _unit(index, arch, work):
    functions = "\n".join(
        f"static double f_{index}_{k}(double x) {{ double y = x; for (int i = 0; i < {k % 7 + 2}; ++i) "
        f"y = y * 1.0000{k % 9 + 1} + {k}.0 / (1.0 + y * y); return y; }}"
        for k in range(work)
    )
    calls = "\n".join(f"    acc += f_{index}_{k}(x + {k});" for k in range(work))
    return _UNIT.format(index=index, arch=arch, functions=functions, calls=calls)


def gen_cutlass_fused_moe_module(nvcc_flags, device_arch, use_fast_build=False):
    units = int(os.environ.get("GB10_STANDIN_MOE_UNITS", "24"))
    work = int(os.environ.get("GB10_STANDIN_UNIT_WORK", "400"))
    output_dir = jit_env.FLASHINFER_GEN_SRC_DIR / f"cutlass_instantiations/{device_arch}"
    sources = []
    for index in range(units):
        path = output_dir / f"fused_moe_unit_{index}.generated.c"
        write_if_different(path, _unit(index, device_arch, work))
        sources.append(path)
    flags = list(nvcc_flags) + (["-DFAST_BUILD"] if use_fast_build else [])
    return gen_jit_spec(f"fused_moe_{device_arch}", sources, extra_cuda_cflags=flags)


def gen_cutlass_fused_moe_sm120_module(use_fast_build=False):
    return gen_cutlass_fused_moe_module(
        ["-DENABLE_FP4", "-DCOMPILE_BLACKWELL_SM120_TMA_GROUPED_GEMMS"], "120", use_fast_build
    )


def gen_cutlass_fused_moe_sm103_module(use_fast_build=False):
    return gen_cutlass_fused_moe_module(["-DENABLE_FP4"], "103", use_fast_build)


def gen_cutlass_fused_moe_sm100_module(use_fast_build=False):
    return gen_cutlass_fused_moe_module(["-DENABLE_FP4"], "100", use_fast_build)


def gen_cutlass_fused_moe_sm90_module(use_fast_build=False):
    return gen_cutlass_fused_moe_module(["-DCOMPILE_HOPPER_TMA_GROUPED_GEMMS"], "90", use_fast_build)


def gen_cutlass_fused_moe_sm89_module(use_fast_build=False):
    return gen_cutlass_fused_moe_module(["-DENABLE_FP8"], "89", use_fast_build)
