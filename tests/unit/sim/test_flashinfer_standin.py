"""The flashinfer stand-in driven by the role's prebuild entry point (issue 9, simulation).

Real gcc work through ninja, the real cache layout, and a second run with the cache present rebuilds nothing.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.build_identity import (
    ninja_identity,
    sha256_text,
)
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.build_log import classify_build_log

REPO = Path(__file__).parents[3]
STANDIN = REPO / "sim" / "flashinfer_standin"
ENTRY = REPO / "roles" / "flashinfer_jit" / "files" / "flashinfer_prebuild.py"
DIGEST = "registry:5000/gb10-sim/vllm-standin@sha256:" + "5" * 64
SMALL = {"GB10_STANDIN_MOE_UNITS": "6", "GB10_STANDIN_UNIT_WORK": "40", "CC": "gcc", "MAX_JOBS": "2"}

pytestmark = pytest.mark.skipif(
    not (shutil.which("ninja") and shutil.which("gcc")), reason="needs ninja and gcc (apt-get install ninja-build gcc)"
)


def standin_env(workspace, **extra):
    """Only what a process needs to import the stand-in with its workspace at ``workspace``, and ``extra``."""
    return {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(STANDIN),
        "FLASHINFER_WORKSPACE_BASE": str(workspace),
        **SMALL,
        **extra,
    }


def python(args, env, timeout):
    return subprocess.run(
        [sys.executable, *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def prebuild(workspace, **extra):
    env = standin_env(workspace, **{"HOME": str(workspace), "GB10_IMAGE_DIGEST": DIGEST, **extra})
    proc = python([str(ENTRY), "--compute-capability", "12.1"], env, timeout=300)
    results = [line for line in proc.stdout.splitlines() if line.startswith("GB10_PREBUILD_RESULT ")]
    assert results, proc.stdout + proc.stderr
    return proc.returncode, json.loads(results[-1].split(" ", 1)[1]), proc.stdout


def test_standin_builds_into_the_real_layout_then_rebuilds_nothing(tmp_path):
    rc, first, out = prebuild(tmp_path)
    assert (rc, first["status"]) == (0, "built"), out
    build_dir = tmp_path / ".cache/flashinfer/0.6.18/121a/cached_ops/fused_moe_120"
    assert first["library"] == str(build_dir / "fused_moe_120.so")
    assert first["stamp"]["image_digest"] == DIGEST
    assert first["stamp"]["arch"] == "121a"
    assert "-O3 $\n    -DNDEBUG" in (build_dir / "build.ninja").read_text()
    assert out.count("gcc -fPIC") == 6
    log_lines = (build_dir / ".ninja_log").read_text().splitlines()
    mtime = (build_dir / "fused_moe_120.so").stat().st_mtime_ns

    rc, second, _stdout = prebuild(tmp_path)
    assert (rc, second["status"]) == (0, "present")

    # What a serving process does: flashinfer's own call in a fresh process; ninja has nothing to do.
    proc = serving_call(tmp_path)
    assert "ninja: no work to do." in proc.stdout, proc.stdout + proc.stderr
    assert proc.stdout.strip().endswith("loaded")
    assert (build_dir / ".ninja_log").read_text().splitlines() == log_lines
    assert (build_dir / "fused_moe_120.so").stat().st_mtime_ns == mtime


def test_standin_refuses_a_debug_build(tmp_path):
    rc, result, _stdout = prebuild(tmp_path, FLASHINFER_JIT_VERBOSE="1")
    assert (rc, result["status"]) == (2, "refused")
    assert not (tmp_path / ".cache/flashinfer/0.6.18/121a/cached_ops/fused_moe_120/fused_moe_120.so").exists()


def test_pitfall_standin_killed_compiler_is_reported_as_oom(tmp_path):
    """A compiler killed by SIGKILL mid-build: the log the role reads is classified as an OOM kill."""
    wrapper = tmp_path / "killcc"
    wrapper.write_text('#!/bin/sh\ncase "$*" in *fused_moe_unit_3*) kill -9 $$;; esac\nexec gcc "$@"\n')
    wrapper.chmod(0o755)
    rc, result, _stdout = prebuild(tmp_path, CC=str(wrapper))
    assert (rc, result["status"]) == (3, "failed")
    log = Path(result["log"]).read_text().splitlines()
    assert classify_build_log(log)["kind"] == "oom_kill", log


def serving_call(workspace, **extra):
    """The serving process's own call, in a fresh process: get_cutlass_fused_moe_module with ninja's lines shown."""
    code = "from flashinfer.fused_moe.core import get_cutlass_fused_moe_module as g; g('121'); print('loaded')"
    shown = {"FLASHINFER_CUDA_ARCH_LIST": "12.1", "FLASHINFER_JIT_VERBOSE": "1", "FLASHINFER_JIT_DEBUG": "0"}
    return python(["-c", code], standin_env(workspace, **{**shown, **extra}), timeout=120)


def test_pitfall_standin_another_cc_rebuilds_every_unit(tmp_path):
    """Issue 17: CC reaches build.ninja (flashinfer's -ccbin), so a serving process with another CC rebuilds."""
    rc, _first, out = prebuild(tmp_path)
    assert rc == 0, out
    build_dir = tmp_path / ".cache/flashinfer/0.6.18/121a/cached_ops/fused_moe_120"
    before = (build_dir / "build.ninja").read_text()
    log_before = (build_dir / ".ninja_log").read_text().splitlines()
    gcc = shutil.which("gcc")
    proc = serving_call(tmp_path, CC=gcc)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ninja: no work to do." not in proc.stdout
    assert f"nvcc = {gcc}" in (build_dir / "build.ninja").read_text()
    assert "nvcc = gcc" in before
    # ninja records every unit it ran: 6 compiles and the link, appended to the prebuild's lines.
    assert len((build_dir / ".ninja_log").read_text().splitlines()) == len(log_before) + 7


def test_standin_ninja_text_carries_its_inputs(tmp_path, monkeypatch):
    """generate_ninja_build_for_op writes nothing and names CC, CXX, CUDA_HOME, extra flags and the cache path."""
    monkeypatch.syspath_prepend(str(STANDIN))
    code = (
        "from flashinfer.jit import cpp_ext, fused_moe as f; s = f.gen_cutlass_fused_moe_sm120_module();"
        "print(cpp_ext.generate_ninja_build_for_op(s.name, s.sources, s.extra_cflags, s.extra_cuda_cflags,"
        " s.extra_ldflags, s.extra_include_dirs, s.needs_device_linking)); print(s.ninja_path.exists())"
    )
    env = standin_env(
        tmp_path,
        FLASHINFER_CUDA_ARCH_LIST="12.1",
        CC="/opt/gcc/bin/gcc",
        CXX="/opt/gcc/bin/g++",
        CUDA_HOME="/usr/local/cuda-13.0",
        FLASHINFER_EXTRA_CUDAFLAGS="-DX=1",
    )
    proc = python(["-c", code], env, timeout=60)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    for needle in ("nvcc = /opt/gcc/bin/gcc", "cxx = /opt/gcc/bin/g++", "cuda_home = /usr/local/cuda-13.0", "-DX=1"):
        assert needle in out
    assert f"build {tmp_path}/.cache/flashinfer/0.6.18/121a/cached_ops/fused_moe_120/" in out
    assert out.strip().endswith("False")


def ninja_only(workspace, **extra):
    env = standin_env(workspace, **{"HOME": str(workspace), **extra})
    proc = python([str(ENTRY), "--ninja-only", "--compute-capability", "12.1"], env, timeout=120)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("GB10_PREBUILD_NINJA ")]
    assert proc.returncode == 0 and lines, proc.stdout + proc.stderr
    return json.loads(lines[-1].split(" ", 1)[1])


def test_stamp_records_the_build_ninja_the_serving_environment_writes(tmp_path):
    """Issue 17 item 1: the stamp keys the build.ninja; --ninja-only gives the same text there and writes nothing."""
    rc, first, out = prebuild(tmp_path)
    assert rc == 0, out
    build_dir = tmp_path / ".cache/flashinfer/0.6.18/121a/cached_ops/fused_moe_120"
    ninja = (build_dir / "build.ninja").read_text()
    assert first["stamp"]["ninja_sha256"] == sha256_text(ninja)
    log = (build_dir / ".ninja_log").read_text()
    assert first["stamp"]["ninja_log_lines"] == len(log.splitlines())
    assert first["stamp"]["ninja_log_sha256"] == sha256_text(log)
    assert first["stamp"]["steps"] == 7
    same = ninja_only(tmp_path)
    assert (same["sha256"], same["text"]) == (first["stamp"]["ninja_sha256"], ninja)
    other = ninja_only(tmp_path, CC=shutil.which("gcc"))
    assert other["sha256"] != same["sha256"]
    assert (build_dir / "build.ninja").read_text() == ninja, "--ninja-only must not write build.ninja"
    verdict = ninja_identity("gb10-1", first["stamp"], ninja, other["text"])
    assert not verdict["same"]
    assert f"+nvcc = {shutil.which('gcc')}" in verdict["diff"]
    assert "-nvcc = gcc" in verdict["diff"]
    # The prebuild itself no longer calls the cache present for another CC: it rebuilds and restamps.
    rc, again, out = prebuild(tmp_path, CC=shutil.which("gcc"))
    assert (rc, again["status"]) == (0, "built"), out
    assert again["stamp"]["ninja_sha256"] == other["sha256"]
