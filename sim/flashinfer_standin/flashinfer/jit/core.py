"""JitSpec of the stand-in: real C units compiled by gcc through ninja, with flashinfer 0.6.18's names and rules.

- debug flags when FLASHINFER_JIT_DEBUG (or, unset, FLASHINFER_JIT_VERBOSE) is "1" (gen_jit_spec);
- ``ninja -j MAX_JOBS`` only when MAX_JOBS is all digits (cpp_ext._get_num_workers);
- ``JitSpecNvcc.write_ninja`` writes ``cpp_ext.generate_ninja_build_for_op(...)`` (CC, CXX, CUDA_HOME, flags,
  include paths, the cache's path) to ``<FLASHINFER_JIT_DIR>/<name>/build.ninja`` when it differs;
  build_and_load always runs ninja, which has nothing to do only when build.ninja (every unit's command) and the
  sources are unchanged: another CC rebuilds every unit, as in flashinfer (JitSpecNvcc.try_load trusts only AOT
  artifacts). Ninja's output is printed when FLASHINFER_JIT_VERBOSE=1;
- ``build_and_load`` loads a prebuilt artifact first when one covers the target (``try_load``, env.get_aot_artifacts:
  flashinfer 0.7.2.post1's JIT-cache providers, or 0.6.18's own data/aot) and then runs no ninja at all.
"""

import ctypes
import dataclasses
import os
from pathlib import Path

from . import env as jit_env
from .cpp_ext import generate_ninja_build_for_op, run_ninja
from .utils import write_if_different


def is_debug():
    debug = os.environ.get("FLASHINFER_JIT_DEBUG")
    return (debug if debug is not None else os.environ.get("FLASHINFER_JIT_VERBOSE", "0")) == "1"


@dataclasses.dataclass
class JitSpecNvcc:
    name: str
    sources: list[Path]
    extra_cflags: list[str] | None
    extra_cuda_cflags: list[str] | None
    extra_ldflags: list[str] | None
    extra_include_dirs: list[Path] | None
    is_class: bool = False
    needs_device_linking: bool = False

    @property
    def ninja_path(self):
        return jit_env.FLASHINFER_JIT_DIR / self.name / "build.ninja"

    @property
    def build_dir(self):
        return jit_env.FLASHINFER_JIT_DIR / self.name

    @property
    def jit_library_path(self):
        return jit_env.FLASHINFER_JIT_DIR / self.name / f"{self.name}.so"

    def get_library_path(self):
        return self.jit_library_path

    @property
    def is_compiled(self):
        return self.jit_library_path.exists()

    def write_ninja(self):
        self.build_dir.mkdir(parents=True, exist_ok=True)
        content = generate_ninja_build_for_op(
            name=self.name,
            sources=self.sources,
            extra_cflags=self.extra_cflags,
            extra_cuda_cflags=self.extra_cuda_cflags,
            extra_ldflags=self.extra_ldflags,
            extra_include_dirs=self.extra_include_dirs,
            needs_device_linking=self.needs_device_linking,
        )
        write_if_different(self.ninja_path, content)

    def build(self, verbose=None, need_lock=False):
        if verbose is None:
            verbose = os.environ.get("FLASHINFER_JIT_VERBOSE", "0") == "1"
        self.write_ninja()
        run_ninja(self.build_dir, self.ninja_path, verbose)

    def load(self, so_path=None):
        return ctypes.CDLL(str(so_path or self.jit_library_path))

    @property
    def aot_artifacts(self):
        return jit_env.get_aot_artifacts(self.name)

    @property
    def is_aot(self):
        return bool(self.aot_artifacts)

    @property
    def aot_path(self):
        artifacts = self.aot_artifacts
        return artifacts[0].path if artifacts else jit_env.FLASHINFER_AOT_DIR / self.name / f"{self.name}.so"

    def try_load(self):
        """A prebuilt artifact for the target loads without ninja (0.7.2.post1 JitSpecNvcc.try_load); else None."""
        for artifact in self.aot_artifacts:
            try:
                return self.load(artifact.path)
            except OSError:
                continue
        return None

    def build_and_load(self):
        loaded = self.try_load()
        if loaded is not None:
            return loaded
        self.build()
        return self.load()


JitSpec = JitSpecNvcc


def gen_jit_spec(
    name,
    sources,
    extra_cflags=None,
    extra_cuda_cflags=None,
    extra_ldflags=None,
    extra_include_paths=None,
    needs_device_linking=False,
):
    flags = ["-O0", "-g"] if is_debug() else ["-O3", "-DNDEBUG"]
    return JitSpecNvcc(
        name=name,
        sources=[Path(s) for s in sources],
        extra_cflags=flags + list(extra_cflags or []),
        extra_cuda_cflags=flags + list(extra_cuda_cflags or []),
        extra_ldflags=extra_ldflags,
        extra_include_dirs=[Path(p) for p in extra_include_paths] if extra_include_paths is not None else None,
        needs_device_linking=needs_device_linking,
    )
