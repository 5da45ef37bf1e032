# Copyright: gb10.serving maintainers
# Apache-2.0
"""Monitoring in the simulation (issue 20, item 1; roles/monitoring, on in inventories/sim): Prometheus on spark-1
scrapes both replicas on their own addresses, both proxies' HAProxy and both nodes' exporters, and its recorded
summed tokens/s is the replicas' own counters summed (seed 002: read through the proxy, the counters jumped between
replicas).

What is exact and what is not: at rest, the counter Prometheus holds for each replica is the one the replica's own
/metrics shows, and the recorded site series is the sum of the recorded per-replica series at every evaluation.
Under load, the recorded rate is Prometheus's rate() over monitoring_rate_window, which extrapolates to the window's
edges from samples taken every scrape interval, so it matches the rate from the replicas' own counters over the same
window within a tolerance, not to the token.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
import urllib.request

import pytest
import yaml
from _api import API_KEY, replica_counter

from ansible_collections.gb10.serving.plugins.module_utils import _loadgen

# Changes no engine: runs on the site as converged, the real engine in make test (conftest.py).
pytestmark = pytest.mark.converged_site

NODES = ("spark-1", "spark-2")
TOKENS = "vllm:generation_tokens_total"
SITE_JOBS = ("vllm", "haproxy", "node")


def settings(sim):
    return yaml.safe_load((sim.inventory / "group_vars" / "all" / "monitoring.yml").read_text())


def seconds(duration):
    return float(duration.rstrip("s"))


def query(sim, expr, at=None):
    """[(labels, value)] of an instant query of the simulation's Prometheus (spark-1's fabric address)."""
    params = {"query": expr, **({"time": f"{at:.3f}"} if at is not None else {})}
    url = f"http://{sim.node_ip('spark-1')}:9090/api/v1/query?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=10) as answer:
        body = json.loads(answer.read())
    assert body["status"] == "success", body
    return [(sample["metric"], float(sample["value"][1])) for sample in body["data"]["result"]]


def own_tokens(sim, node):
    """The replica's own generated-token counter, from its own /metrics."""
    return replica_counter(sim.replica_url(node), TOKENS)


def wait_for(check, what, limit):
    deadline = time.monotonic() + limit
    while True:
        found = check()
        if found[0] or time.monotonic() > deadline:
            assert found[0], f"not within {limit:.0f} s: {what}: {found[1]}"
            return found[1]
        time.sleep(1)


def test_prometheus_scrapes_every_replica_proxy_and_node(served_sim):
    def every_target_up():
        up = query(served_sim, "up")
        by_job = {}
        for labels, value in up:
            by_job.setdefault(labels["job"], []).append((labels.get("node", labels.get("instance")), value))
        # the site's jobs (Prometheus's own job, scraping itself, beside them)
        counts = {job: sum(1 for _target, value in by_job.get(job, []) if value == 1) for job in SITE_JOBS}
        return counts == dict.fromkeys(SITE_JOBS, 2), by_job

    targets = wait_for(every_target_up, "two vllm, two haproxy and two node targets up", 60)
    # each replica on its own address, never through the proxy's port
    assert sorted(node for node, _value in targets["vllm"]) == list(NODES), targets
    recorded = {labels["job"]: value for labels, value in query(served_sim, "gb10:up:sum")}
    assert recorded == dict.fromkeys(SITE_JOBS, 2), recorded


def test_the_recorded_sum_is_the_replicas_own_counters(served_sim):
    sim = served_sim
    conf = settings(sim)
    window, step = seconds(conf["monitoring_rate_window"]), seconds(conf["monitoring_evaluation_interval"])
    stop = threading.Event()
    prompt = _loadgen.filler_prompt(32)

    def load():
        while not stop.is_set():
            _loadgen.run(
                sim.proxy_url, "tiny-moe", 4, 8, prompt, 32, 60, 20, api_key=API_KEY, ca_path=str(sim.proxy_ca)
            )

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    try:
        time.sleep(step * 2)  # the load reaches both replicas before the window opens
        opened = time.time()
        before = {node: own_tokens(sim, node) for node in NODES}
        time.sleep(window)
        closed = time.time()
        after = {node: own_tokens(sim, node) for node in NODES}
        time.sleep(step * 2)  # the evaluation that ends at `closed` has run
    finally:
        stop.set()
        worker.join(timeout=120)
    own = {node: (after[node] - before[node]) / (closed - opened) for node in NODES}
    assert all(rate > 0 for rate in own.values()), f"a replica served nothing through the proxy: {own}"

    per_replica = {
        labels["node"]: value for labels, value in query(sim, "gb10_replica:vllm_generation_tokens:rate", closed)
    }
    (site,) = [value for _labels, value in query(sim, "gb10:vllm_generation_tokens:rate", closed)]
    print(f"\ntokens/s over {closed - opened:.1f} s, own counters {own}, recorded {per_replica}, summed {site:.2f}")
    assert sorted(per_replica) == list(NODES), per_replica
    assert abs(site - sum(per_replica.values())) <= 1e-6 * max(site, 1.0), (site, per_replica)
    # rate()'s extrapolation and a scrape every few seconds: within a fifth of the replicas' own figure
    assert abs(site - sum(own.values())) <= 0.2 * sum(own.values()), (site, own)

    # At rest, the counter Prometheus holds for each replica is the replica's own (the watchdog's one-token probes
    # still move it now and then: wait for a scrape that agrees).
    def held_equals_own():
        held = {labels["node"]: value for labels, value in query(sim, f'sum by (node) ({TOKENS}{{job="vllm"}})')}
        mine = {node: own_tokens(sim, node) for node in NODES}
        return held == mine, (held, mine)

    wait_for(held_equals_own, "Prometheus's counters equal the replicas' own", 60)
