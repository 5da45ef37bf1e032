# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""A bounded load generator for the sweep: N concurrent streaming chat requests against one endpoint.

Threads and ansible.module_utils.urls.open_url (urllib underneath). Every request carries a timeout, every run a
request count and a deadline, so a sweep cannot run away. Returns request records for _bench.summarize(); the
first request of a target is sent alone and flagged ``warmup`` so it is never counted (seed 004: the first
request after a start compiles kernels).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error

from ansible.module_utils.urls import Request, make_context

_TLS = {}  # one TLS context per CA file ("" the system store), built once each: loading a CA store takes ~60 ms
_TLS_LOCK = threading.Lock()


# Three-letter words, each one token with its leading space in byte-level BPE vocabularies, and four characters a
# word, which is also the stand-in engine's rule of thumb (about four characters a token). "item123" was two or
# three tokens: the sweep's "long" prompt of 4096 came to 8067 tokens and the simulation refused it (over 8192).
# The context ladder's recall prompt is made of the same words.
FILLER_WORDS = ("red", "sun", "cat", "dog", "box", "map", "pen", "cup", "hat", "key")
FILLER_QUESTION = "\nSummarise the list above in one sentence."


def filler_prompt(tokens):
    """A prompt of about ``tokens`` tokens (one a word), ending with the question."""
    words = max(1, int(tokens))
    body = " ".join(FILLER_WORDS[n % len(FILLER_WORDS)] for n in range(words))
    return body + FILLER_QUESTION


def _request(ca_path=""):
    """An ansible.module_utils.urls Request that sends what a plain urllib opener sends: no ~/.netrc credentials,
    no gzip decoding (a stream stays a stream), certificates and host names always verified: against ``ca_path``
    (a PEM of CA certificates: the proxy's proxy_tls_ca, the plan's api.ca) where given, else the system CA store.

    open_url would build a TLS context (~60 ms of CPU) on every call, inside the timed window and under the GIL of
    every worker; the context is built once per CA file here, and callers take the Request before they start the
    clock."""
    key = str(ca_path or "")
    with _TLS_LOCK:
        if key not in _TLS:
            _TLS[key] = make_context(cafile=key or None, validate_certs=True)
        context = _TLS[key]
    return Request(use_netrc=False, decompress=False, context=context)


def api_headers(api_key=""):
    """The headers of a request to a replica or the proxy: ``Authorization: Bearer <key>`` when the site has a key
    (gb10_api_key; vLLM and the proxy's public frontend answer /v1 with 401 without it)."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def _post(request, url, body, timeout, api_key=""):
    """POST ``body`` as JSON to ``url``/v1/chat/completions; the response is read as it arrives."""
    return request.open(
        "POST",
        url.rstrip("/") + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers=api_headers(api_key),
        timeout=timeout,
    )


def one_request(
    url, model, prompt, max_tokens, timeout, clock=time.monotonic, require_finish=False, api_key="", ca_path=""
):
    """One streaming chat completion; returns a record with start / first_token / end / completion_tokens / ok.

    ``require_finish``: a stream that ends without a finish_reason was cut short (a replica died under it) and
    fails the record. ``ca_path``: the CA an https ``url`` is verified against (else the system store)."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": int(max_tokens),
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    request = _request(ca_path)
    record = {"start": clock(), "first_token": None, "end": None, "completion_tokens": 0, "ok": False, "error": ""}
    record["status"] = 0
    pieces, finish = 0, None
    try:
        with _post(request, url, body, timeout, api_key) as resp:
            record["status"] = resp.status
            for raw in resp:
                line = raw.decode("utf-8", "replace").strip()
                if not line.startswith("data:") or line.endswith("[DONE]"):
                    continue
                chunk = json.loads(line[5:])
                usage = chunk.get("usage") or {}
                if usage.get("completion_tokens") is not None:
                    record["completion_tokens"] = int(usage["completion_tokens"])
                for choice in chunk.get("choices") or []:
                    finish = choice.get("finish_reason") or finish
                    delta = choice.get("delta") or {}
                    if delta.get("content") or delta.get("reasoning") or delta.get("tool_calls"):
                        pieces += 1
                        if record["first_token"] is None:
                            record["first_token"] = clock()
        if require_finish and finish is None:
            raise ValueError("the stream ended without a finish_reason (cut short)")
        record["ok"] = True
    except (urllib.error.URLError, OSError, ValueError) as exc:
        record["status"] = getattr(exc, "code", record["status"])
        record["error"] = str(exc)[:200]
    record["end"] = clock()
    if record["ok"] and not record["completion_tokens"]:
        record["completion_tokens"] = pieces
    return record


def plain_request(url, model, prompt, max_tokens, timeout, clock=time.monotonic, api_key="", ca_path=""):
    """One non-streaming chat completion; a record with start / end / status / completion_tokens / ok / error."""
    body = {"model": model, "messages": [{"role": "user", "content": prompt}], "max_tokens": int(max_tokens)}
    request = _request(ca_path)
    record = {"start": clock(), "end": None, "status": 0, "completion_tokens": 0, "ok": False, "error": ""}
    try:
        with _post(request, url, body, timeout, api_key) as resp:
            record["status"] = resp.status
            answer = json.loads(resp.read())
        if not answer.get("choices"):
            raise ValueError(f"a completion without choices: {str(answer)[:120]}")
        record["completion_tokens"] = int((answer.get("usage") or {}).get("completion_tokens") or 0)
        record["ok"] = True
    except (urllib.error.URLError, OSError, ValueError) as exc:
        record["status"] = getattr(exc, "code", record["status"])
        record["error"] = str(exc)[:200]
    record["end"] = clock()
    return record


class Steady:
    """A steady stream of chat requests through one endpoint until stop(): ``concurrency`` workers, each sending
    plain and streaming requests in turn with ``pause_s`` between them. Every request carries ``timeout``; stop()
    waits for the requests in flight and returns every record (``stream`` says which kind it was). ``ca_path``: the CA
    an https ``url`` is verified against."""

    def __init__(
        self,
        url,
        model,
        concurrency=2,
        max_tokens=8,
        timeout=120,
        pause_s=0.1,
        clock=time.monotonic,
        api_key="",
        ca_path="",
    ):
        self.url, self.model, self.max_tokens, self.timeout = url, model, max_tokens, timeout
        self.api_key, self.ca_path = api_key, ca_path
        self.concurrency, self.pause_s, self.clock = max(1, int(concurrency)), float(pause_s), clock
        self.records, self._lock, self._stop = [], threading.Lock(), threading.Event()
        self._threads = []

    def _worker(self, n):
        stream = bool(n % 2)
        while not self._stop.is_set():
            common = (self.url, self.model, "Say hello.", self.max_tokens, self.timeout, self.clock)
            if stream:
                rec = one_request(*common, require_finish=True, api_key=self.api_key, ca_path=self.ca_path)
            else:
                rec = plain_request(*common, self.api_key, ca_path=self.ca_path)
            rec["stream"] = stream
            with self._lock:
                self.records.append(rec)
            stream = not stream
            self._stop.wait(self.pause_s)

    def start(self):
        self._threads = [threading.Thread(target=self._worker, args=(n,), daemon=True) for n in range(self.concurrency)]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self):
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=float(self.timeout) + 5)
        with self._lock:
            return list(self.records)


def failures(records):
    """The records that failed or answered 5xx (a 5xx the client read as an answer still counts)."""
    return [r for r in records if not r.get("ok") or int(r.get("status") or 0) >= 500]


def run(
    url,
    model,
    concurrency,
    requests,
    prompt,
    max_tokens,
    timeout,
    deadline_s,
    clock=time.monotonic,
    api_key="",
    ca_path="",
):
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
            rec = one_request(url, model, prompt, max_tokens, timeout, clock, api_key=api_key, ca_path=ca_path)
            with lock:
                records.append(rec)

    threads = [threading.Thread(target=worker, daemon=True) for _n in range(max(1, int(concurrency)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=float(deadline_s) + float(timeout) + 5)
    return records


def warmup(url, model, max_tokens, timeout, clock=time.monotonic, api_key="", ca_path=""):
    """The first request after a start, sent alone; its record is flagged and never counted."""
    record = one_request(url, model, "Say hello.", max_tokens, timeout, clock, api_key=api_key, ca_path=ca_path)
    record["warmup"] = True
    return record


def read_metrics(url, timeout):
    """The text of ``url``/metrics (one replica's own)."""
    with _request().open("GET", url.rstrip("/") + "/metrics", timeout=timeout) as resp:
        return resp.read().decode("utf-8", "replace")
