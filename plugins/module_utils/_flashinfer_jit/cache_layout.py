# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Which module vLLM asks for, and where flashinfer keeps it (``flashinfer/jit/env.py``,
``flashinfer/fused_moe/core.py`` ``get_cutlass_fused_moe_module``)."""

from __future__ import annotations

import re

from .errors import FlashinferJitError

STAMP_NAME = "gb10-prebuild.json"

LOG_NAME = "gb10-prebuild.log"


def capability(compute_capability):
    text = str(compute_capability).strip()
    m = (
        re.fullmatch(r"(\d+)\.(\d+)", text)
        or re.fullmatch(r"sm_?(\d)(\d)", text)
        or re.fullmatch(r"sm_?(\d\d)(\d)", text)
    )
    if not m:
        raise FlashinferJitError(f"compute capability must look like '12.1' or 'sm121', got {compute_capability!r}")
    return int(m.group(1)), int(m.group(2))


def arch_dir(compute_capability):
    """flashinfer's per-arch cache folder for one GPU (CompilationContext._normalize_cuda_arch, CUDA >= 12.9)."""
    major, minor = capability(compute_capability)
    if major == 9:
        suffix = f"{minor}a"
    elif major == 12:
        suffix = "0f" if minor == 0 else f"{minor}a"
    elif major >= 10:
        suffix = f"{minor}a"
    else:
        suffix = f"{minor}"
    return f"{major}{suffix}"


_MOE_MODULES = {
    "120": "fused_moe_120",
    "121": "fused_moe_120",
    "103": "fused_moe_103",
    "100": "fused_moe_100",
    "107": "fused_moe_100",
    "110": "fused_moe_100",
    "90": "fused_moe_90",
    "89": "fused_moe_89",
}


def moe_backend(compute_capability):
    major, minor = capability(compute_capability)
    return f"{major * 10 + minor}"


def moe_module_name(compute_capability):
    """The CUTLASS fused-MoE JIT module get_cutlass_fused_moe_module builds for this GPU."""
    backend = moe_backend(compute_capability)
    if backend not in _MOE_MODULES:
        raise FlashinferJitError(f"flashinfer has no CUTLASS fused-MoE module for sm{backend}")
    return _MOE_MODULES[backend]


def cache_paths(workspace_base, flashinfer_version, compute_capability, module=None):
    """Paths inside a FLASHINFER_WORKSPACE_BASE for the fused-MoE module of one arch (strings, posix)."""
    module = module or moe_module_name(compute_capability)
    base = str(workspace_base).rstrip("/")
    workspace = f"{base}/.cache/flashinfer/{flashinfer_version}/{arch_dir(compute_capability)}"
    build_dir = f"{workspace}/cached_ops/{module}"
    return {
        "workspace": workspace,
        "build_dir": build_dir,
        "library": f"{build_dir}/{module}.so",
        "ninja": f"{build_dir}/build.ninja",
        "stamp": f"{build_dir}/{STAMP_NAME}",
        "log": f"{build_dir}/{LOG_NAME}",
        "module": module,
    }
