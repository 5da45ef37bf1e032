# Copyright: gb10.serving maintainers
# Apache-2.0
"""The starting point every module of this suite relies on: both replicas serve, directly and through the proxy."""

from __future__ import annotations

import time

import pytest
from _api import replica_counter

# Changes no engine: runs on the site as converged, the real engine in make test (conftest.py).
pytestmark = pytest.mark.converged_site


def _successes(url):
    return replica_counter(url, "vllm:request_success_total")


def test_both_replicas_ready_in_the_proxy(served_sim):
    states = served_sim.backend_states()
    assert set(states) == {"spark-1", "spark-2"}, states
    assert all(state == (2, 0) for state in states.values()), states


def test_requests_through_the_proxy_reach_both_replicas(served_sim):
    started = time.monotonic()
    before = {node: _successes(served_sim.replica_url(node)) for node in ("spark-1", "spark-2")}
    answers = [served_sim.chat(f"hello {n}") for n in range(8)]
    after = {node: _successes(served_sim.replica_url(node)) for node in ("spark-1", "spark-2")}
    window = time.monotonic() - started
    # Each answer is a generation the engine counted: 8 tokens (or fewer, stopped). Not its text: the real engine's
    # random-weight model decodes some 8-token answers to "" (bytes that make no whole character, measured on
    # vLLM 0.32.0's CPU build), where the stand-in always writes words.
    finished = [(a["choices"][0]["finish_reason"], a["usage"]["completion_tokens"]) for a in answers]
    assert all(reason in ("length", "stop") and 0 < tokens <= 8 for reason, tokens in finished), finished
    served = {node: after[node] - before[node] for node in before}
    print(f"\n8 requests through the proxy in {window:.1f} s, served per replica (own /metrics): {served}")
    # Each replica's watchdog sends its own one-token completion every serving_watchdog_interval (30 s), straight to
    # the replica: in a window shorter than that, at most one per replica lands beside the eight.
    assert window < 30, window
    assert all(count > 0 for count in served.values()), served
    assert 8 <= sum(served.values()) <= 8 + len(served), served
