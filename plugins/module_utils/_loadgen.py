"""A bounded load generator for the sweep: N concurrent streaming chat requests against one endpoint.

Standard library only (threads + urllib). Every request carries a timeout, every run a request count and a
deadline, so a sweep cannot run away. Returns request records for _bench.summarize(); the first request of a
target is sent alone and flagged ``warmup`` so it is never counted (seed 004: the first request after a start
compiles kernels).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request


def filler_prompt(tokens):
    """A prompt of roughly ``tokens`` tokens (about one token per short word), ending with the question."""
    words = max(1, int(tokens))
    body = " ".join(f"item{n % 1000}" for n in range(words))
    return f"{body}\nSummarise the list above in one sentence."


def one_request(url, model, prompt, max_tokens, timeout, clock=time.monotonic):
    """One streaming chat completion; returns a record with start / first_token / end / completion_tokens / ok."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": int(max_tokens),
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    req = urllib.request.Request(
        url.rstrip("/") + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    record = {"start": clock(), "first_token": None, "end": None, "completion_tokens": 0, "ok": False, "error": ""}
    pieces = 0
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            for raw in resp:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:") or line.endswith("[DONE]"):
                    continue
                chunk = json.loads(line[5:])
                usage = chunk.get("usage") or {}
                if usage.get("completion_tokens") is not None:
                    record["completion_tokens"] = int(usage["completion_tokens"])
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    if delta.get("content") or delta.get("reasoning") or delta.get("tool_calls"):
                        pieces += 1
                        if record["first_token"] is None:
                            record["first_token"] = clock()
        record["ok"] = True
    except (urllib.error.URLError, OSError, ValueError) as exc:
        record["error"] = str(exc)[:200]
    record["end"] = clock()
    if record["ok"] and not record["completion_tokens"]:
        record["completion_tokens"] = pieces
    return record


def run(url, model, concurrency, requests, prompt, max_tokens, timeout, deadline_s, clock=time.monotonic):
    """``requests`` requests with ``concurrency`` in flight, stopping new ones after ``deadline_s`` seconds."""
    records, lock = [], threading.Lock()
    remaining = [int(requests)]
    stop_at = clock() + float(deadline_s)

    def worker():
        while True:
            with lock:
                if remaining[0] <= 0 or clock() >= stop_at:
                    return
                remaining[0] -= 1
            rec = one_request(url, model, prompt, max_tokens, timeout, clock)
            with lock:
                records.append(rec)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, int(concurrency)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=float(deadline_s) + float(timeout) + 5)
    return records


def warmup(url, model, max_tokens, timeout, clock=time.monotonic):
    """The first request after a start, sent alone; its record is flagged and never counted."""
    record = one_request(url, model, "Say hello.", max_tokens, timeout, clock)
    record["warmup"] = True
    return record


def read_metrics(url, timeout):
    """The text of ``url``/metrics (one replica's own)."""
    with urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=timeout) as resp:
        return resp.read().decode("utf-8", "replace")
