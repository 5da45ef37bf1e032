"""The stand-in vLLM's profiling pass builds FlashInfer's fused-MoE module when the node's cache lacks it (issue 9).

Each start is a fresh process, as a container start is: the first one compiles for real (gcc through ninja at
MAX_JOBS), the second finds the module in FLASHINFER_WORKSPACE_BASE and rebuilds nothing. Seed 004 ("The CUTLASS
saga"): the JIT output died with the container when the cache was not mounted, so every restart paid the build.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
PATH = os.pathsep.join([str(REPO / "sim" / "flashinfer_standin"), str(REPO / "sim" / "standin" / "src")])
SMALL = {"GB10_STANDIN_MOE_UNITS": "4", "GB10_STANDIN_UNIT_WORK": "30", "MAX_JOBS": "2"}
START = """
import json, sys, time
from vllm._standin import cli
started = time.monotonic()
kv, resident = cli.profile_and_size_kv(json.loads(sys.argv[1]), int(sys.argv[2]))
print("GB10_START", json.dumps({"seconds": time.monotonic() - started, "tokens": kv and kv["tokens"],
                                "resident": len(resident or b"")}))
"""

pytestmark = pytest.mark.skipif(
    not (shutil.which("ninja") and shutil.which("gcc")), reason="needs ninja and gcc (apt-get install ninja-build gcc)"
)


def model(tmp_path, **config):
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    base = {"num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64}
    (folder / "config.json").write_text(json.dumps({**base, **config}))
    return folder


def start(tmp_path, folder, max_model_len=8192, **env):
    config = {
        "model": str(folder),
        "tensor_parallel_size": 1,
        "max_model_len": max_model_len,
        "max_num_seqs": 4,
        "gpu_memory_utilization": 0.45,
        "kv_cache_dtype": None,
        "kv_cache_memory_bytes": None,
    }
    environ = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": PATH,
        "HOME": str(tmp_path),
        "FLASHINFER_WORKSPACE_BASE": str(tmp_path / "cache"),
        "GB10_STANDIN_MEMORY_SCALE": "128",
        **SMALL,
        **env,
    }
    argv = [sys.executable, "-c", START, json.dumps(config), str(100 * 2**20)]
    return subprocess.run(argv, env=environ, capture_output=True, text=True, timeout=300, check=False)


def result(proc):
    found = [line for line in proc.stdout.splitlines() if line.startswith("GB10_START ")]
    assert found, proc.stdout + proc.stderr
    return json.loads(found[-1].split(" ", 1)[1])


def test_pitfall_jit_at_profiling_builds_once_then_the_cache_serves_every_restart(tmp_path):
    folder = model(tmp_path, num_local_experts=8)
    library = tmp_path / "cache/.cache/flashinfer/0.6.18/121a/cached_ops/fused_moe_120/fused_moe_120.so"

    first = start(tmp_path, folder)
    cold = result(first)
    assert "fused_moe_120 is not in the cache" in first.stdout
    assert "fused_moe_120 built in" in first.stdout
    assert library.exists()
    mtime = library.stat().st_mtime_ns
    log = (library.parent / ".ninja_log").read_text()

    second = start(tmp_path, folder)
    warm = result(second)
    assert "fused_moe_120 loaded from the cache" in second.stdout, second.stdout
    assert "not in the cache" not in second.stdout
    assert library.stat().st_mtime_ns == mtime
    assert (library.parent / ".ninja_log").read_text() == log
    print(f"\nstart with the module missing: {cold['seconds']:.2f} s; with it cached: {warm['seconds']:.2f} s")


def test_a_dense_model_asks_for_no_moe_module(tmp_path):
    proc = start(tmp_path, model(tmp_path))
    assert result(proc)["tokens"] > 0
    assert "FlashInfer JIT" not in proc.stdout
    assert not (tmp_path / "cache").exists()


def test_startup_refuses_a_context_the_kv_cache_cannot_hold(tmp_path):
    proc = start(tmp_path, model(tmp_path), max_model_len=262144)
    assert proc.returncode != 0
    assert "To serve at least one request with the model's max seq len (262144)" in proc.stderr
