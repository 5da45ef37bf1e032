# Copyright: gb10.serving maintainers
# Apache-2.0
"""The starting point every module of this suite relies on: both replicas serve, directly and through the proxy."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def _successes(url):
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "vllm:request_success_total"
    )


def test_both_replicas_ready_in_the_proxy(served_sim):
    states = served_sim.backend_states()
    assert set(states) == {"spark-1", "spark-2"}, states
    assert all(state == (2, 0) for state in states.values()), states


def test_requests_through_the_proxy_reach_both_replicas(served_sim):
    before = {node: _successes(served_sim.replica_url(node)) for node in ("spark-1", "spark-2")}
    answers = [served_sim.chat(f"hello {n}") for n in range(8)]
    after = {node: _successes(served_sim.replica_url(node)) for node in ("spark-1", "spark-2")}
    assert all(answer["choices"][0]["message"]["content"] for answer in answers)
    served = {node: after[node] - before[node] for node in before}
    print(f"\n8 requests through the proxy, served per replica (each replica's own /metrics): {served}")
    assert sum(served.values()) == 8, served
    assert all(count > 0 for count in served.values()), served
