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

from ansible_collections.gb10.serving.plugins.module_utils import _flashinfer_jit as fj

REPO = Path(__file__).parents[3]
STANDIN = REPO / "sim" / "flashinfer_standin"
ENTRY = REPO / "roles" / "flashinfer_jit" / "files" / "flashinfer_prebuild.py"
DIGEST = "registry:5000/gb10-sim/vllm-standin@sha256:" + "5" * 64
SMALL = {"GB10_STANDIN_MOE_UNITS": "6", "GB10_STANDIN_UNIT_WORK": "40", "CC": "gcc", "MAX_JOBS": "2"}

pytestmark = pytest.mark.skipif(
    not (shutil.which("ninja") and shutil.which("gcc")), reason="needs ninja and gcc (apt-get install ninja-build gcc)"
)


def prebuild(workspace, **extra):
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(workspace),
        "PYTHONPATH": str(STANDIN),
        "FLASHINFER_WORKSPACE_BASE": str(workspace),
        "GB10_IMAGE_DIGEST": DIGEST,
        **SMALL,
        **extra,
    }
    argv = [sys.executable, str(ENTRY), "--compute-capability", "12.1"]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300, check=False)
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
    assert "-O3 -DNDEBUG" in (build_dir / "build.ninja").read_text()
    assert out.count("gcc -fPIC") == 6
    log_lines = (build_dir / ".ninja_log").read_text().splitlines()
    mtime = (build_dir / "fused_moe_120.so").stat().st_mtime_ns

    rc, second, _stdout = prebuild(tmp_path)
    assert (rc, second["status"]) == (0, "present")

    # What a serving process does: flashinfer's own call in a fresh process; ninja has nothing to do.
    code = "from flashinfer.fused_moe.core import get_cutlass_fused_moe_module as g; g('121'); print('loaded')"
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(STANDIN),
        "FLASHINFER_WORKSPACE_BASE": str(tmp_path),
        "FLASHINFER_CUDA_ARCH_LIST": "12.1",
        "FLASHINFER_JIT_VERBOSE": "1",
        "FLASHINFER_JIT_DEBUG": "0",
        **SMALL,
    }
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=False
    )
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
    assert fj.classify_build_log(log)["kind"] == "oom_kill", log
