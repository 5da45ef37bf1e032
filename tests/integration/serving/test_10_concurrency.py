# Copyright: gb10.serving maintainers
# Apache-2.0
"""200 concurrent requests through the proxy with 12 sequences per replica (issue 3, seed 002).

Serving is re-applied with max_num_seqs 12 (the proxy's per-server maxconn follows it), a burst of 200 requests goes
to the proxy while each replica's own /metrics is polled, and the proxy's statistics are read: none fails, no
replica ever runs more than 12 (seed 002: above 8 long requests one replica got slower, so excess waits in the
proxy), and the rest waited in the proxy's queue. The site stays at 12 sequences: the first rolling upgrade of
test_20 takes it back to the profile's 4 and checks that the proxy's maxconn follows (DESIGN section 6). Only a
failure here restores the profile at once.
"""

from __future__ import annotations

import copy
import json
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import yaml
from _api import api_headers
from _profile import PROFILE
from prometheus_client.parser import text_string_to_metric_families

NODES = ("spark-1", "spark-2")
SEQS = 12
BURST = 200
APPLY = "tests/integration/serving/serving_apply.yml"


def _profiles_with_seqs(repo, seqs):
    path = repo / "inventories" / "sim" / "group_vars" / "all" / "serving_profiles.yml"
    profiles = copy.deepcopy(yaml.safe_load(path.read_text())["serving_profiles"])
    profile = profiles[PROFILE]
    profile["defaults"]["max_num_seqs"] = seqs
    for node in (profile.get("nodes") or {}).values():
        node.pop("max_num_seqs", None)
    return profiles


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
    try:
        served_sim.playbook(APPLY, {"serving_profiles": _profiles_with_seqs(served_sim.repo, SEQS)})
        served_sim.wait_all_ready()
        stats = served_sim.proxy_stats()
        assert {node: stats[node]["slim"] for node in NODES} == {node: str(SEQS) for node in NODES}, stats
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
            f"\n{BURST} requests in {elapsed:.1f}s through the proxy; running peak per replica {peaks}; "
            f"replica waiting peak {waiting_peaks}; proxy queue: polled peak {proxy_queue_peak}, qmax {qmax}; "
            f"served per replica {served}"
        )
        failures = [answer for answer in answers if answer[0] != 200]
        assert not failures, failures[:5]
        assert all(peak <= SEQS for peak in peaks.values()), peaks
        assert max(qmax.values()) > 0 or proxy_queue_peak > 0, (qmax, proxy_queue_peak)
        assert all(count > 0 for count in served.values()), served
    except BaseException:
        served_sim.playbook(APPLY)
        served_sim.wait_all_ready()
        raise
