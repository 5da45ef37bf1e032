# Copyright: gb10.serving maintainers
# Apache-2.0
"""200 concurrent requests through the proxy, each replica at its own --max-num-seqs (issue 3, seed 002).

On the site as it serves (`converged_site`: make test's is the real vLLM engine, nothing is applied or restarted),
each proxy's per-server maxconn must equal its replica's --max-num-seqs as the running container was started with
(seed 002: above 8 long requests one replica got slower, so excess waits in the proxy). A burst of 200 requests then
goes to the proxy while each replica's own /metrics is polled, and the proxy's statistics are read: none fails, no
replica ever runs more than its limit, and the rest waited in the proxy's queue. That the proxy's maxconn follows a
changed --max-num-seqs is the first rolling upgrade's check (test_20: its target moves the limit).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
from _api import api_headers
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.converged_site

NODES = ("spark-1", "spark-2")
BURST = 200


def _gauge(url, name):
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name)


def _request(url, n, context):
    body = json.dumps(
        {"model": "tiny-moe", "messages": [{"role": "user", "content": f"request {n}"}], "max_tokens": 16}
    ).encode()
    request = urllib.request.Request(f"{url}/v1/chat/completions", data=body, headers=api_headers())
    try:
        with urllib.request.urlopen(request, timeout=300, context=context) as answer:
            return answer.status, json.loads(answer.read())["choices"][0]["finish_reason"]
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(errors="replace")[:200]
    except OSError as exc:
        return None, str(exc)


def test_200_concurrent_requests_wait_in_the_proxy_never_in_a_replica(served_sim):
    seqs = {node: served_sim.running_seqs(node) for node in NODES}
    for proxy in served_sim.proxies():
        stats = served_sim.proxy_stats(proxy)
        assert {node: int(stats[node]["slim"]) for node in NODES} == seqs, (proxy, seqs, stats)
    for node in NODES:  # the first request after a start is a warm-up: not part of the burst
        served_sim.chat("warm-up", url=served_sim.replica_url(node))
    served_sim.proxy_admin("clear counters")

    peaks = {node: 0.0 for node in NODES}
    waiting_peaks = {node: 0.0 for node in NODES}
    proxy_queue_peak = 0
    done = threading.Event()

    def poll():
        nonlocal proxy_queue_peak
        while not done.is_set():
            for node in NODES:
                url = served_sim.replica_url(node)
                peaks[node] = max(peaks[node], _gauge(url, "vllm:num_requests_running"))
                waiting_peaks[node] = max(waiting_peaks[node], _gauge(url, "vllm:num_requests_waiting"))
            backend = served_sim.proxy_stats().get("BACKEND", {})
            proxy_queue_peak = max(proxy_queue_peak, int(backend.get("qcur") or 0))
            time.sleep(0.2)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    started = time.monotonic()
    # Through TLS, each request verifying the proxy's certificate against the simulation's CA (one context).
    tls = served_sim.tls
    with ThreadPoolExecutor(max_workers=BURST) as pool:
        answers = list(pool.map(lambda n: _request(served_sim.proxy_url, n, tls), range(BURST)))
    elapsed = time.monotonic() - started
    done.set()
    poller.join(timeout=30)

    stats = served_sim.proxy_stats()
    served = {node: int(stats[node]["stot"]) for node in NODES}
    qmax = {name: int(stats[name]["qmax"] or 0) for name in (*NODES, "BACKEND")}
    print(
        f"\n{BURST} requests in {elapsed:.1f}s through the proxy; --max-num-seqs {seqs}; "
        f"running peak per replica {peaks}; "
        f"replica waiting peak {waiting_peaks}; proxy queue: polled peak {proxy_queue_peak}, qmax {qmax}; "
        f"served per replica {served}"
    )
    failures = [answer for answer in answers if answer[0] != 200]
    assert not failures, failures[:5]
    assert all(peaks[node] <= seqs[node] for node in NODES), (peaks, seqs)
    assert max(qmax.values()) > 0 or proxy_queue_peak > 0, (qmax, proxy_queue_peak)
    assert all(count > 0 for count in served.values()), served
