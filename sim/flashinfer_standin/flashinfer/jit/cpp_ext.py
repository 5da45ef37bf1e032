"""build.ninja generation and the ninja run, with flashinfer 0.6.18 jit/cpp_ext.py's names and inputs.

``generate_ninja_build_for_op`` returns the text and writes nothing (JitSpecNvcc.write_ninja writes it), so the
role can ask what a process with a given environment would write. What reaches the text, as in flashinfer:
``CC`` (flashinfer: ``-ccbin $CC`` in every nvcc command; here the C compiler of every unit), ``CXX`` (``cxx =``,
the link), ``CUDA_HOME`` (``cuda_home =``), ``FLASHINFER_EXTRA_CUDAFLAGS`` / ``FLASHINFER_EXTRA_LDFLAGS``, the
compiler launchers, the include paths (the workspace's ``generated`` folder and the spec's extra include dirs) and
the absolute output paths under ``FLASHINFER_JIT_DIR`` (so the cache's container path). Ninja rebuilds every unit
whose command changed and records each unit it runs in ``<build_dir>/.ninja_log``, as it does for flashinfer.
"""

import os
import shlex
import subprocess
import sys
from pathlib import Path

from . import env as jit_env


def parse_env_flags(env_var_name):
    value = os.environ.get(env_var_name)
    return shlex.split(value) if value else None


def get_cuda_path():
    # flashinfer: CUDA_HOME, else the nvcc on PATH, else /usr/local/cuda; the stand-in has no nvcc.
    return os.environ.get("CUDA_HOME", "/usr/local/cuda")


def join_multiline(values):
    return " $\n    ".join(values)


def build_common_cflags(extra_include_dirs):
    includes = [jit_env.FLASHINFER_GEN_SRC_DIR, *list(extra_include_dirs or [])]
    return ["-fPIC", *[f"-I{Path(p).resolve()}" for p in includes]]


def build_cuda_cflags(common_cflags, extra_cuda_cflags=None):
    cuda_cflags = ["$common_cflags", *list(extra_cuda_cflags or [])]
    env_extra = parse_env_flags("FLASHINFER_EXTRA_CUDAFLAGS")
    if env_extra is not None:
        cuda_cflags += env_extra
    return cuda_cflags


def generate_ninja_build_for_op(
    name,
    sources,
    extra_cflags,
    extra_cuda_cflags,
    extra_ldflags,
    extra_include_dirs,
    needs_device_linking=False,
):
    cuda_home = get_cuda_path()
    common_cflags = build_common_cflags(extra_include_dirs)
    cuda_cflags = build_cuda_cflags(common_cflags, extra_cuda_cflags)
    ldflags = ["-shared"]
    env_extra_ldflags = parse_env_flags("FLASHINFER_EXTRA_LDFLAGS")
    if env_extra_ldflags is not None:
        ldflags += env_extra_ldflags
    if extra_ldflags is not None:
        ldflags += extra_ldflags
    # flashinfer's nvcc gets -ccbin $CC; the stand-in's "nvcc" is the C compiler itself, so CC is its command.
    cc = os.environ.get("CC", "gcc")
    cxx = os.environ.get("CXX", "c++")
    cxx_launcher = os.environ.get("FLASHINFER_CXX_LAUNCHER", "")
    nvcc_launcher = os.environ.get("FLASHINFER_NVCC_LAUNCHER", "")
    lines = [
        "ninja_required_version = 1.3",
        f"name = {name}",
        f"cuda_home = {cuda_home}",
        f"cxx = {cxx}",
        f"nvcc = {cc}",
        f"cxx_launcher = {cxx_launcher}",
        f"nvcc_launcher = {nvcc_launcher}",
        "",
        "common_cflags = " + join_multiline(common_cflags),
        "cflags = " + join_multiline(list(extra_cflags or [])),
        "cuda_cflags = " + join_multiline(cuda_cflags),
        "ldflags = " + join_multiline(ldflags),
        "",
        "rule cuda_compile",
        "  command = $nvcc_launcher $nvcc $cuda_cflags -MMD -MF $out.d -c $in -o $out",
        "  depfile = $out.d",
        "  deps = gcc",
        "",
        "rule link",
        "  command = $nvcc $in $ldflags -o $out",
        "",
    ]
    output_dir = jit_env.FLASHINFER_JIT_DIR / name
    objects = []
    for source in sources:
        source = Path(source)
        obj = str((output_dir / f"{source.parent.name}_{source.stem}.cuda.o").resolve())
        objects.append(obj)
        lines.append(f"build {obj}: cuda_compile {source.resolve()}")
    lines.append("")
    output_so = str((output_dir / f"{name}.so").resolve())
    lines.append(f"build {output_so}: link " + " ".join(objects))
    lines.append(f"default {output_so}")
    lines.append("")
    return "\n".join(lines)


def _get_num_workers():
    max_jobs = os.environ.get("MAX_JOBS")
    if max_jobs is not None and max_jobs.isdigit():
        return int(max_jobs)
    return None


def run_ninja(workdir, ninja_file, verbose):
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    command = ["ninja", "-v", "-C", str(workdir.resolve()), "-f", str(Path(ninja_file).resolve())]
    num_workers = _get_num_workers()
    if num_workers is not None:
        command += ["-j", str(num_workers)]
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        subprocess.run(
            command,
            stdout=None if verbose else subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=str(workdir.resolve()),
            check=True,
            text=True,
        )
    except subprocess.CalledProcessError as exc:
        msg = "Ninja build failed."
        if exc.output:
            msg += " Ninja output:\n" + exc.output
        raise RuntimeError(msg) from exc
