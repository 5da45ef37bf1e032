"""Cache layout of flashinfer 0.6.18 (jit/env.py): $FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/<ver>/<archs>.

And the prebuilt modules of flashinfer 0.7.2.post1's JIT-cache providers (get_aot_artifacts, below).
"""

import dataclasses
import importlib.util
import os
import pathlib
import re

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

# Prebuilt modules (issue 38 item 4), as flashinfer 0.7.2.post1's jit/env.py finds them: the ``flashinfer_jit_cache``
# shim lists its per-architecture providers (get_jit_cache_providers), a provider whose version is not this
# flashinfer's (a ``+cuXYZ`` local suffix allowed) is ignored, and a module is taken from a provider only for a target
# architecture it covers (``_cuda_architecture.cuda_binary_target_compatibility_score``: an ``a`` target runs on its
# own compute capability alone, ``f`` and plain ones forward within their major). 0.6.18 itself looks in its own
# ``data/aot`` only; the stand-in keeps both (README.md, "Prebuilt modules").
FLASHINFER_AOT_DIR = pathlib.Path(__file__).resolve().parents[1] / "data" / "aot"


@dataclasses.dataclass(frozen=True)
class AOTProvider:
    provider_id: str
    distribution: str
    version: str
    jit_cache_dir: pathlib.Path
    cuda_architectures: frozenset
    modules: frozenset


@dataclasses.dataclass(frozen=True)
class AOTArtifact:
    provider_id: str
    path: pathlib.Path
    cuda_architectures: frozenset | None


def _version_matches(version):
    return (
        bool(os.environ.get("FLASHINFER_DISABLE_VERSION_CHECK"))
        or version == flashinfer_version
        or version.startswith(f"{flashinfer_version}+")
    )


def _get_aot_providers():
    if importlib.util.find_spec("flashinfer_jit_cache") is None:
        return ()
    import flashinfer_jit_cache

    if not _version_matches(flashinfer_jit_cache.__version__):
        return ()
    return tuple(
        AOTProvider(
            provider.provider_id,
            provider.distribution,
            provider.version,
            pathlib.Path(provider.jit_cache_dir),
            frozenset(provider.cuda_architectures),
            frozenset(provider.modules),
        )
        for provider in flashinfer_jit_cache.get_jit_cache_providers()
        if _version_matches(provider.version) and provider.version == flashinfer_jit_cache.__version__
    )


FLASHINFER_AOT_PROVIDERS = _get_aot_providers()


def _parse(architecture):
    match = re.fullmatch(r"sm(\d+)(\d)([af]?)", architecture)
    return int(match.group(1)), int(match.group(2)), match.group(3)


def compatibility_score(binary_target, device_architecture):
    """None when code for ``binary_target`` cannot run on ``device_architecture`` (0.7.2.post1's rule)."""
    binary, device = _parse(binary_target), _parse(device_architecture)
    if binary == device:
        return (4, binary[1])
    if binary[2] == "a":
        return (3, binary[1]) if binary[:2] == device[:2] else None
    if binary[0] != device[0] or binary[1] > device[1]:
        return None
    return (2 if binary[2] == "f" else 1, binary[1])


def target_cuda_architectures():
    return frozenset(f"sm{major}{minor}" for major, minor in target_archs())


def get_aot_artifacts(module_name):
    """The prebuilt artifact of ``module_name`` chosen for each target architecture, as 0.7.2.post1 chooses."""
    fallback = FLASHINFER_AOT_DIR / module_name / f"{module_name}.so"
    if fallback.exists():
        return (AOTArtifact("flashinfer-python", fallback, None),)
    selected = {}
    for target in sorted(target_cuda_architectures()):
        candidates = []
        for provider in FLASHINFER_AOT_PROVIDERS:
            scores = [compatibility_score(arch, target) for arch in provider.cuda_architectures]
            scores = [score for score in scores if score is not None]
            path = provider.jit_cache_dir / module_name / f"{module_name}.so"
            if module_name in provider.modules and scores and path.exists():
                artifact = AOTArtifact(provider.provider_id, path, provider.cuda_architectures)
                candidates.append((max(scores), provider.provider_id, artifact))
        if candidates:
            artifact = max(candidates, key=lambda candidate: candidate[:2])[2]
            selected[(artifact.provider_id, artifact.path)] = artifact
    return tuple(sorted(selected.values(), key=lambda artifact: artifact.provider_id))
