"""Cache layout of flashinfer 0.6.18 (jit/env.py): $FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/<ver>/<archs>."""

import os
import pathlib

from .. import __version__ as flashinfer_version


def _normalize(major, minor):
    # CompilationContext._normalize_cuda_arch (CUDA >= 12.9)
    if major == 9:
        return major, f"{minor}a"
    if major == 12:
        return major, "0f" if minor == 0 else f"{minor}a"
    if major >= 10:
        return major, f"{minor}a"
    return major, str(minor)


def target_archs():
    """From FLASHINFER_CUDA_ARCH_LIST (the stand-in has no GPU to ask); empty when unset, as flashinfer without GPUs."""
    archs = set()
    for item in os.environ.get("FLASHINFER_CUDA_ARCH_LIST", "").split():
        major, minor = item.split(".")
        archs.add((int(major), minor) if minor[-1].isalpha() else _normalize(int(major), int(minor)))
    return archs


FLASHINFER_BASE_DIR = pathlib.Path(os.getenv("FLASHINFER_WORKSPACE_BASE", pathlib.Path.home().as_posix()))
FLASHINFER_CACHE_DIR = FLASHINFER_BASE_DIR / ".cache" / "flashinfer"
FLASHINFER_WORKSPACE_DIR = (
    FLASHINFER_CACHE_DIR / flashinfer_version / "_".join(f"{major}{minor}" for major, minor in sorted(target_archs()))
)
FLASHINFER_JIT_DIR = FLASHINFER_WORKSPACE_DIR / "cached_ops"
FLASHINFER_GEN_SRC_DIR = FLASHINFER_WORKSPACE_DIR / "generated"
