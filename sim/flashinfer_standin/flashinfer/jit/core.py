"""JitSpec of the stand-in: real C units compiled by gcc through ninja, with flashinfer 0.6.18's rules.

- debug flags when FLASHINFER_JIT_DEBUG (or, unset, FLASHINFER_JIT_VERBOSE) is "1" (gen_jit_spec);
- ``ninja -j MAX_JOBS`` only when MAX_JOBS is all digits (cpp_ext._get_num_workers);
- build_and_load always runs ninja, which has nothing to do when build.ninja and the sources are unchanged
  (JitSpecNvcc.try_load trusts only AOT artifacts); ninja's output is printed when FLASHINFER_JIT_VERBOSE=1.
"""

import ctypes
import dataclasses
import os
import subprocess
from pathlib import Path

from . import env as jit_env


def _write_if_different(path, content):
    path = Path(path)
    if path.exists() and path.read_text() == content:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)


def is_debug():
    debug = os.environ.get("FLASHINFER_JIT_DEBUG")
    return (debug if debug is not None else os.environ.get("FLASHINFER_JIT_VERBOSE", "0")) == "1"


@dataclasses.dataclass
class JitSpec:
    name: str
    sources: list[Path]
    extra_cuda_cflags: list[str]

    @property
    def build_dir(self):
        return jit_env.FLASHINFER_JIT_DIR / self.name

    @property
    def ninja_path(self):
        return self.build_dir / "build.ninja"

    @property
    def jit_library_path(self):
        return self.build_dir / f"{self.name}.so"

    @property
    def is_compiled(self):
        return self.jit_library_path.exists()

    def write_ninja(self):
        cc = os.environ.get("CC", "gcc")
        lines = [
            "ninja_required_version = 1.3",
            f"cc = {cc}",
            f"cflags = -fPIC {' '.join(self.extra_cuda_cflags)}",
            "",
            "rule compile",
            "  command = $cc $cflags -MMD -MF $out.d -c $in -o $out",
            "  depfile = $out.d",
            "  deps = gcc",
            "",
            "rule link",
            "  command = $cc -shared $in -o $out",
            "",
        ]
        objects = []
        for source in self.sources:
            obj = f"{source.stem}.o"
            objects.append(obj)
            lines.append(f"build {obj}: compile {source}")
        lines += ["", f"build {self.name}.so: link {' '.join(objects)}", f"default {self.name}.so", ""]
        _write_if_different(self.ninja_path, "\n".join(lines))

    def build(self):
        command = ["ninja", "-v", "-C", str(self.build_dir), "-f", str(self.ninja_path)]
        max_jobs = os.environ.get("MAX_JOBS")
        if max_jobs is not None and max_jobs.isdigit():
            command += ["-j", max_jobs]
        verbose = os.environ.get("FLASHINFER_JIT_VERBOSE", "0") == "1"
        try:
            subprocess.run(
                command,
                stdout=None if verbose else subprocess.PIPE,
                stderr=subprocess.STDOUT,
                check=True,
                text=True,
            )
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"Ninja build failed.\n{exc.output or ''}") from exc

    def build_and_load(self):
        self.build_dir.mkdir(parents=True, exist_ok=True)
        self.write_ninja()
        self.build()
        return ctypes.CDLL(str(self.jit_library_path))


def gen_jit_spec(name, sources, extra_cuda_cflags=None):
    flags = ["-O0", "-g"] if is_debug() else ["-O3", "-DNDEBUG"]
    return JitSpec(
        name=name, sources=[Path(s) for s in sources], extra_cuda_cflags=flags + list(extra_cuda_cflags or [])
    )
