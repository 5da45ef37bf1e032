# Copyright: gb10.serving maintainers
# Apache-2.0
"""sim/vllm_cpu/gpu_layer.py, the `vllm` of the real-engine sim image: which starts ask FlashInfer for the fused-MoE
module, and that a module the flashinfer_jit role prebuilt is loaded, not rebuilt, by the serving start (seed 004).
FlashInfer is the stand-in of sim/flashinfer_standin (real gcc work through ninja); the real engine itself runs in
`make serve-real` and `make sim`."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
LAYER = REPO / "sim" / "vllm_cpu" / "gpu_layer.py"
STANDIN = REPO / "sim" / "flashinfer_standin"
PREBUILD = REPO / "roles" / "flashinfer_jit" / "files" / "flashinfer_prebuild.py"
SMALL = {"GB10_STANDIN_MOE_UNITS": "4", "GB10_STANDIN_UNIT_WORK": "20", "CC": "gcc", "MAX_JOBS": "2"}
_spec = importlib.util.spec_from_file_location("gpu_layer", LAYER)
gpu_layer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gpu_layer)


def test_the_model_is_the_positional_of_vllm_serve():
    assert gpu_layer.served_model_dir(["serve", "/snap", "--port", "8000"]) == "/snap"
    assert gpu_layer.served_model_dir(["serve", "--help"]) is None
    assert gpu_layer.served_model_dir(["--version"]) is None
    assert gpu_layer.served_model_dir([]) is None


@pytest.mark.parametrize(
    ("config", "moe"),
    [
        ({"num_local_experts": 4}, True),  # Mixtral, the sim model
        ({"n_routed_experts": 256}, True),  # DeepSeek
        ({"num_experts": 128}, True),  # Qwen3 MoE
        ({"num_local_experts": 1}, False),
        ({"hidden_size": 256}, False),  # dense
        ({"num_local_experts": "many"}, False),
    ],
)
def test_only_a_model_routing_over_experts_asks_for_the_module(tmp_path, config, moe):
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert gpu_layer.routes_over_experts(str(tmp_path)) is moe


def test_a_folder_without_config_asks_nothing(tmp_path):
    assert gpu_layer.routes_over_experts(str(tmp_path)) is False


def ask_module(workspace):
    """gpu_layer's call in a fresh process, as a serving start makes it, with the node's cache at `workspace`."""
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(STANDIN), "FLASHINFER_WORKSPACE_BASE": str(workspace), **SMALL}
    code = f"import runpy; runpy.run_path({str(LAYER)!r})['fused_moe_module']('12.1')"
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.mark.skipif(not (shutil.which("ninja") and shutil.which("gcc")), reason="needs ninja and gcc")
def test_pitfall_cutlass_jit_at_profiling_a_prebuilt_module_is_loaded_not_rebuilt(tmp_path):
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(STANDIN),
        "FLASHINFER_WORKSPACE_BASE": str(tmp_path),
        "HOME": str(tmp_path),
        "GB10_IMAGE_DIGEST": "registry:5000/gb10/vllm-cpu@sha256:" + "1" * 64,
        **SMALL,
    }
    built = subprocess.run(
        [sys.executable, str(PREBUILD), "--compute-capability", "12.1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    library = tmp_path / ".cache/flashinfer/0.6.18/121a/cached_ops/fused_moe_120/fused_moe_120.so"
    mtime = library.stat().st_mtime_ns

    start = ask_module(tmp_path)
    assert start.returncode == 0, start.stdout + start.stderr
    assert "fused_moe_120 loaded from the cache" in start.stderr
    assert "is not in the cache" not in start.stderr
    assert library.stat().st_mtime_ns == mtime


@pytest.mark.skipif(not (shutil.which("ninja") and shutil.which("gcc")), reason="needs ninja and gcc")
def test_pitfall_cutlass_jit_at_profiling_a_missing_module_is_built_by_the_start(tmp_path):
    start = ask_module(tmp_path)
    assert start.returncode == 0, start.stdout + start.stderr
    assert "fused_moe_120 is not in the cache" in start.stderr
    assert "fused_moe_120 built in" in start.stderr
    assert (tmp_path / ".cache/flashinfer/0.6.18/121a/cached_ops/fused_moe_120/fused_moe_120.so").is_file()
