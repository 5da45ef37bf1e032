#!/usr/bin/env python
# Copyright: gb10.serving maintainers
# Apache-2.0
"""make bench-affinity: what session affinity (roles/proxy proxy_affinity, issue 20 item 3) does to the replicas'
prefix caches and the time to first token, with the real engine's prefix cache.

Needs a converged simulation (make sim, same SIM_SUBNET_BASE / GB10_SIM_TLS_DIR) whose replicas run vLLM itself:
the simulation's stand-in engine has no prefix cache and no vllm:prefix_cache_* counters, and then this bench says so
and exits 2 before it changes anything. Runs, each with fresh prompts (no run warms the next):
1. the proxy re-rendered with proxy_affinity: none (least connections; the session header is ignored);
2. the same with proxy_affinity: header (consistent hash on X-Session-Id, bounded load);
then the proxy back to the inventory's own setting. The workload: BENCH_CONVERSATIONS conversations in parallel, each
BENCH_TURNS turns in a row, each turn the conversation's long system prompt, its history so far and a new question
(streamed, a few tokens: what is measured is the prompt's prefill). Printed per run: each replica's prefix-cache hit
rate from its own counters (vllm:prefix_cache_hits_total over vllm:prefix_cache_queries_total, deltas over the run,
read from each replica's own /metrics, never through the proxy), the summed rate, and p50/p95 time to first token.
Figures are printed, never asserted.
"""

from __future__ import annotations

import json
import os
import ssl
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "collections"))

from ansible_collections.gb10.serving.plugins.module_utils._bench import parse_metrics

SUBNET = os.environ.get("SIM_SUBNET_BASE", "10.77.0")
NODES = ("spark-1", "spark-2")
REPLICA_PORT = 8000
PROXY_URL = os.environ.get("BENCH_PROXY_URL", f"https://{SUBNET}.10:8080")
TLS_DIR = Path(os.environ.get("GB10_SIM_TLS_DIR") or REPO / "sim" / "build" / "tls")
HEADER = os.environ.get("BENCH_AFFINITY_HEADER", "X-Session-Id")
# The profile the simulation was converged with (make sim's SIM_PROFILE): the proxy re-renders from its plan.
PROFILE = os.environ.get("SIM_PROFILE", "sim-real")
CONVERSATIONS = int(os.environ.get("BENCH_CONVERSATIONS", "8"))
TURNS = int(os.environ.get("BENCH_TURNS", "6"))
# Words of each conversation's own system prompt: long enough that its prefix is most of every turn's prompt, short
# enough for the sim model's 8192-token context: its tokenizer spends ~7.8 tokens on each "ruleNNNN" word (measured:
# 200 words, 1561 prompt tokens), so 400 words and six turns stay near 3,500 tokens.
PROMPT_WORDS = int(os.environ.get("BENCH_PROMPT_WORDS", "400"))
HITS, QUERIES = "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"


def counters_missing(metrics_by_replica):
    """The replicas whose /metrics lack vLLM's prefix-cache counters: {replica: [missing names]}."""
    return {
        replica: [name for name in (HITS, QUERIES) if name not in metrics]
        for replica, metrics in metrics_by_replica.items()
        if HITS not in metrics or QUERIES not in metrics
    }


def hit_rates(before, after):
    """{replica: (hits, queries, rate or None)} and the summed (hits, queries, rate) over a run, from counter deltas
    (tokens). None where nothing was looked up; a counter that went backwards (a restart) is refused."""
    per, total_hits, total_queries = {}, 0.0, 0.0
    for replica in sorted(after):
        hits = after[replica][HITS] - before[replica][HITS]
        queries = after[replica][QUERIES] - before[replica][QUERIES]
        if hits < 0 or queries < 0:
            raise ValueError(f"{replica}'s prefix-cache counters went backwards during the run: it restarted")
        per[replica] = (hits, queries, hits / queries if queries else None)
        total_hits, total_queries = total_hits + hits, total_queries + queries
    return per, (total_hits, total_queries, total_hits / total_queries if total_queries else None)


def percentile(values, pct):
    """Nearest-rank percentile (None for no values)."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(0, min(len(ordered) - 1, round(pct / 100.0 * (len(ordered) - 1))))]


def system_prompt(run, conversation):
    """A long prompt of its own per conversation and run: the prefix the replica's cache may keep."""
    words = " ".join(f"rule{(conversation * 7919 + i) % 104729}" for i in range(PROMPT_WORDS))
    return f"[{run} conversation {conversation}] You are an email agent. Follow these house rules: {words}"


def read_metrics():
    """Each replica's own /metrics (never the proxy's address), parsed with prometheus_client."""
    metrics = {}
    for index, node in enumerate(NODES):
        url = f"http://{SUBNET}.{11 + index}:{REPLICA_PORT}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            metrics[node] = parse_metrics(answer.read().decode())
    return metrics


def api_key():
    if os.environ.get("GB10_API_KEY"):
        return os.environ["GB10_API_KEY"]
    security = yaml.safe_load((REPO / "inventories/sim/group_vars/all/security.yml").read_text())
    return security["gb10_api_key"]


def tls_context():
    ca = TLS_DIR / "ca.pem"
    return ssl.create_default_context(cafile=str(ca)) if PROXY_URL.startswith("https") else None


def model_id(key, context):
    request = urllib.request.Request(f"{PROXY_URL}/v1/models", headers={"Authorization": f"Bearer {key}"})
    with urllib.request.urlopen(request, timeout=30, context=context) as answer:
        return json.loads(answer.read())["data"][0]["id"]


def first_token_seconds(key, context, model, messages, session):
    """One streamed chat completion through the proxy: seconds to its first content chunk, and the reply."""
    body = {"model": model, "messages": messages, "max_tokens": 16, "temperature": 0, "stream": True}
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json", HEADER: session}
    request = urllib.request.Request(
        f"{PROXY_URL}/v1/chat/completions", data=json.dumps(body).encode(), headers=headers
    )
    started, first, reply = time.monotonic(), None, []
    with urllib.request.urlopen(request, timeout=600, context=context) as answer:
        for raw in answer:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            delta = (json.loads(line[6:]).get("choices") or [{}])[0].get("delta") or {}
            if delta.get("content"):
                first = first if first is not None else time.monotonic() - started
                reply.append(delta["content"])
    return first, "".join(reply) or "ok"


def workload(run, key, context, model):
    """BENCH_CONVERSATIONS conversations in parallel, BENCH_TURNS turns each in a row: the TTFT of every turn."""
    ttfts, errors, lock = [], [], threading.Lock()

    def conversation(index):
        messages = [{"role": "system", "content": system_prompt(run, index)}]
        for turn in range(TURNS):
            messages.append({"role": "user", "content": f"Turn {turn}: summarise the next email in one line."})
            try:
                first, reply = first_token_seconds(key, context, model, messages, f"{run}-{index}")
            except OSError as err:
                with lock:
                    errors.append(f"conversation {index} turn {turn}: {err}")
                return
            messages.append({"role": "assistant", "content": reply})
            if first is not None:
                with lock:
                    ttfts.append(first)

    threads = [threading.Thread(target=conversation, args=(i,)) for i in range(CONVERSATIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return ttfts, errors


def set_affinity(mode):
    """The proxy re-rendered with proxy_affinity ``mode`` (None: the inventory's own)."""
    argv = ["ansible-playbook", "-i", "inventories/sim", "scripts/bench/affinity_proxy.yml"]
    argv += ["-e", f"serving_profile={PROFILE}"]
    if mode is not None:
        argv += ["-e", f"proxy_affinity={mode}", "-e", f"proxy_affinity_header={HEADER}"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(done.stdout[-4000:], done.stderr[-2000:])
        sys.exit(f"bench-affinity: rendering the proxy with proxy_affinity={mode or 'the inventory s'} failed")


def report(label, per, total, ttfts, errors):
    def rate(value):
        return "n/a (nothing looked up)" if value is None else f"{100 * value:.1f}%"

    print(f"\n{label}")
    for replica, (hits, queries, value) in per.items():
        print(f"  {replica}: prefix-cache hit rate {rate(value)} ({hits:.0f} of {queries:.0f} prompt tokens)")
    print(f"  all replicas: {rate(total[2])} ({total[0]:.0f} of {total[1]:.0f} prompt tokens)")
    if ttfts:
        p50, p95 = statistics.median(ttfts), percentile(ttfts, 95)
        print(f"  time to first token: p50 {p50:.3f} s, p95 {p95:.3f} s over {len(ttfts)} turns")
    else:
        print("  time to first token: no turn answered")
    for error in errors:
        print(f"  error: {error}")


def main():
    missing = counters_missing(read_metrics())
    if missing:
        named = "; ".join(f"{replica} lacks {', '.join(names)}" for replica, names in sorted(missing.items()))
        print(
            f"bench-affinity: no prefix-cache counters ({named}). These replicas run no vLLM with a prefix cache (the "
            "simulation's stand-in engine has none): the hit rates this bench prints must come from vLLM's own "
            "counters. Run it on replicas that serve vLLM itself (the real-engine image, issue 16), with "
            "enable-prefix-caching on. Nothing was changed.",
            file=sys.stderr,
        )
        return 2
    key, context = api_key(), tls_context()
    model = model_id(key, context)
    print(
        f"bench-affinity: {CONVERSATIONS} conversations x {TURNS} turns, a {PROMPT_WORDS}-word system prompt each, "
        f"through {PROXY_URL}, model {model}"
    )
    try:
        for mode in ("none", "header"):
            set_affinity(mode)
            before = read_metrics()
            ttfts, errors = workload(f"{mode}-{int(time.time())}", key, context, model)
            per, total = hit_rates(before, read_metrics())
            report(f"proxy_affinity: {mode}", per, total, ttfts, errors)
    finally:
        set_affinity(None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
