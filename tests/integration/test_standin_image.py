# Copyright: gb10.serving maintainers
# Apache-2.0
"""The built vLLM stand-in image, run as the serving role runs it: inside a simulated node, `--network host`.

One node of its own (prefix GB10_IT_STANDIN_PREFIX, default gb10-it-standin, subnet GB10_IT_STANDIN_SUBNET, default
10.90.0) is started with sim/up.sh unless it already runs, and removed afterwards only if this test started it. The
image is loaded into the node's engine when the node does not hold it yet. Skipped when Docker or the image is
absent (`sim/standin/build.sh` builds it).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
IMAGE = "gb10-sim/vllm-standin:0.32.0"
PREFIX = os.environ.get("GB10_IT_STANDIN_PREFIX", "gb10-it-standin")
SUBNET = os.environ.get("GB10_IT_STANDIN_SUBNET", "10.90.0")
NODE = f"{PREFIX}-spark-1"
NODE_IP = f"{SUBNET}.11"
MODEL_DIR = "/var/lib/gb10/standin-it-model"
ENV = {**os.environ, "SIM_PREFIX": PREFIX, "SIM_NETWORK": PREFIX, "SIM_SUBNET_BASE": SUBNET, "SIM_NODES": "1"}

# A two-shard safetensors snapshot, written inside the node with its own python3.
MAKE_MODEL = f"""
import json, os, struct
d = {MODEL_DIR!r}
os.makedirs(d, exist_ok=True)
json.dump({{"architectures": ["TinyMoe"]}}, open(os.path.join(d, "config.json"), "w"))
weight_map = {{}}
for i in range(2):
    name = "model-%05d-of-00002.safetensors" % (i + 1)
    data = bytes(2 * 1024 * 1024)
    head = json.dumps({{"w%d" % i: {{"dtype": "U8", "shape": [len(data)], "data_offsets": [0, len(data)]}}}}).encode()
    open(os.path.join(d, name), "wb").write(struct.pack("<Q", len(head)) + head + data)
    weight_map["w%d" % i] = name
json.dump({{"weight_map": weight_map}}, open(os.path.join(d, "model.safetensors.index.json"), "w"))
"""


def sh(*args, check=True, **kw):
    return subprocess.run(list(args), capture_output=True, text=True, check=check, env=ENV, **kw)


def node(*args, check=True, **kw):
    return sh("docker", "exec", NODE, *args, check=check, **kw)


def image_id():
    if shutil.which("docker") is None:
        return None
    found = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{.Id}}", IMAGE], capture_output=True, text=True, check=False
    )
    return found.stdout.strip() if found.returncode == 0 else None


pytestmark = pytest.mark.skipif(image_id() is None, reason=f"{IMAGE} is not built (sim/standin/build.sh)")


@pytest.fixture(scope="module")
def sim_node():
    running = sh("docker", "inspect", "-f", "{{.State.Running}}", NODE, check=False).stdout.strip() == "true"
    if not running:
        sh(str(REPO / "sim" / "up.sh"))
    try:
        held = node("docker", "image", "inspect", "-f", "{{.Id}}", IMAGE, check=False).stdout.strip()
        if held != image_id():
            save = subprocess.Popen(["docker", "save", IMAGE], stdout=subprocess.PIPE)
            subprocess.run(["docker", "exec", "-i", NODE, "docker", "load", "-q"], stdin=save.stdout, check=True)
            save.stdout.close()
            assert save.wait() == 0
        node("python3", "-c", MAKE_MODEL)
        yield NODE
    finally:
        node("docker", "rm", "-f", "standin-it", check=False)
        if not running:
            sh(str(REPO / "sim" / "down.sh"), check=False)


def inner_run(*args, env=()):
    flags = [f"-e{e}" for e in env]
    return node(
        "docker", "run", "--rm", "--network", "host", *flags, "-v", f"{MODEL_DIR}:/model:ro", IMAGE, *args, check=False
    )


def curl(path, body=None):
    args = ["curl", "-sS", "--max-time", "20", f"http://{NODE_IP}:8000{path}"]
    if body is not None:
        args += ["-H", "Content-Type: application/json", "-d", json.dumps(body)]
    return node(*args).stdout


def test_image_pins_and_refusals(sim_node):
    versions = inner_run(
        "python",
        "-c",
        "import importlib.metadata as m, importlib.util as u; "
        "print(*[m.version(d) for d in ('vllm', 'flashinfer-python', 'huggingface_hub')], u.find_spec('ray') is None)",
    )
    assert versions.stdout.split() == ["0.32.0", "0.6.18", "2.4.0", "True"]
    assert inner_run("hf", "--help").returncode == 0
    unknown = inner_run("vllm", "serve", "/model", "--no-such-flag")
    assert unknown.returncode == 2
    assert "vllm serve: error: unrecognized arguments: --no-such-flag" in unknown.stderr
    repo_id = inner_run("vllm", "serve", "org/model", env=("MAX_JOBS=2", "GB10_STANDIN_STARTUP_S=0"))
    assert repo_id.returncode == 1
    assert "FileNotFoundError" in repo_id.stderr


def test_serves_on_the_node_address(sim_node):
    argv = ["vllm", "serve", "/model", "--served-model-name", "tiny", "--host", NODE_IP, "--port", "8000"]
    argv += ["--max-num-seqs", "2", "--enable-auto-tool-choice", "--tool-call-parser", "hermes"]
    argv += ["--limit-mm-per-prompt", '{"image":0,"video":0}']
    env = ["-eMAX_JOBS=2", "-eHF_HUB_OFFLINE=1", "-eGB10_STANDIN_STARTUP_S=1", "-eGB10_STANDIN_WARMUP_S=1"]
    node(
        "docker",
        "run",
        "-d",
        "--name",
        "standin-it",
        "--network",
        "host",
        *env,
        "-v",
        f"{MODEL_DIR}:/model:ro",
        IMAGE,
        *argv,
    )
    deadline = time.monotonic() + 30
    while node("curl", "-sf", f"http://{NODE_IP}:8000/health", check=False).returncode != 0:
        assert time.monotonic() < deadline, node("docker", "logs", "standin-it", check=False).stdout
        time.sleep(0.5)
    assert [m["id"] for m in json.loads(curl("/v1/models"))["data"]] == ["tiny"]
    tools = [
        {
            "type": "function",
            "function": {
                "name": "f",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
            },
        }
    ]
    answer = json.loads(
        curl("/v1/chat/completions", {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "tools": tools})
    )
    call = answer["choices"][0]["message"]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"q": "sim"}
    stream = curl(
        "/v1/chat/completions",
        {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "stream": True, "max_tokens": 4},
    )
    events = [line[6:] for line in stream.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert "".join(json.loads(e)["choices"][0]["delta"].get("content", "") for e in events[:-1]) != ""
    metrics = curl("/metrics")
    generated = re.search(r'^vllm:generation_tokens_total\{engine="0",model_name="tiny"\} (\S+)$', metrics, re.M)
    assert generated and float(generated.group(1)) >= 5
    assert 'vllm:num_requests_running{engine="0",model_name="tiny"} 0.0' in metrics
    logs = node("docker", "logs", "standin-it").stdout
    assert "Loading safetensors checkpoint shards: 100% Completed | 2/2" in logs
    assert "running in text-only mode" in logs and "Application startup complete." in logs
    node("docker", "stop", "-t", "20", "standin-it")
    assert node("docker", "inspect", "-f", "{{.State.ExitCode}}", "standin-it").stdout.strip() == "0"


MOE_DIR = "/var/lib/gb10/standin-it-moe"
FI_CACHE = "/var/lib/gb10/standin-it-flashinfer"
MOE_CONFIG = {
    "architectures": ["MixtralForCausalLM"],
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "num_local_experts": 8,
    "max_position_embeddings": 8192,
    "torch_dtype": "bfloat16",
}
MOE_PORT = 8100


def _start_moe(name):
    """Start the MoE snapshot with the node's FlashInfer cache mounted, as the serving unit does; seconds to /health."""
    env = [
        "MAX_JOBS=2",
        "GB10_STANDIN_STARTUP_S=0",
        "GB10_STANDIN_MEMORY_SCALE=128",
        "GB10_STANDIN_MOE_UNITS=12",
        "GB10_STANDIN_UNIT_WORK=150",
        "FLASHINFER_WORKSPACE_BASE=/root/.cache/flashinfer-workspace",
    ]
    argv = ["vllm", "serve", "/model", "--served-model-name", "tiny", "--host", NODE_IP, "--port", str(MOE_PORT)]
    argv += ["--max-model-len", "8192", "--max-num-seqs", "4", "--gpu-memory-utilization", "0.45"]
    started = time.monotonic()
    node(
        "docker", "run", "-d", "--name", name, "--network", "host", *[f"-e{e}" for e in env],
        "-v", f"{MOE_DIR}:/model:ro", "-v", f"{FI_CACHE}:/root/.cache/flashinfer-workspace", IMAGE, *argv,
    )  # fmt: skip
    while node("curl", "-sf", f"http://{NODE_IP}:{MOE_PORT}/health", check=False).returncode != 0:
        assert time.monotonic() - started < 600, node("docker", "logs", name, check=False).stdout
        assert node("docker", "inspect", "-f", "{{.State.Running}}", name).stdout.strip() == "true", node(
            "docker", "logs", name, check=False
        ).stdout
        time.sleep(0.5)
    seconds = time.monotonic() - started
    logs = node("docker", "logs", name).stdout
    node("docker", "rm", "-f", name)
    return seconds, logs


def test_flashinfer_jit_builds_on_the_first_start_and_the_cache_serves_the_restart(sim_node):
    """Issue 9: a start without the fused-MoE module in the node's cache compiles it (slow); a restart does not."""
    node("sh", "-c", f"rm -rf {MOE_DIR} {FI_CACHE} && mkdir -p {FI_CACHE} && cp -r {MODEL_DIR} {MOE_DIR}")
    node("python3", "-c", f"import json; json.dump({MOE_CONFIG!r}, open('{MOE_DIR}/config.json', 'w'))")
    library = f"{FI_CACHE}/.cache/flashinfer/0.6.18/121a/cached_ops/fused_moe_120/fused_moe_120.so"
    try:
        cold, cold_logs = _start_moe("standin-it-jit")
        assert "fused_moe_120 is not in the cache" in cold_logs and "fused_moe_120 built in" in cold_logs, cold_logs
        mtime = node("stat", "-c", "%Y.%y", library).stdout
        warm, warm_logs = _start_moe("standin-it-jit")
        assert "fused_moe_120 loaded from the cache" in warm_logs, warm_logs
        assert "not in the cache" not in warm_logs
        assert node("stat", "-c", "%Y.%y", library).stdout == mtime
        assert "GPU KV cache size: " in warm_logs
        print(f"\nstart to /health: {cold:.1f} s with the fused-MoE module missing, {warm:.1f} s with it cached")
    finally:
        node("docker", "rm", "-f", "standin-it-jit", check=False)
        node("rm", "-rf", MOE_DIR, FI_CACHE, check=False)
