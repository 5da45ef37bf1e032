# Copyright: gb10.serving maintainers
# Apache-2.0
"""A third node joins the serving site and later leaves it, each under a steady load through the proxy (issue 40,
items 2 and 3). Opt-in: `make test-scale` (GB10_IT_SCALE=1, against a running simulation; it starts spark-3 with
the simulation's own recipe, sim/up.sh with SIM_NODES=3, if it is not there). Outside make test's budget: the
converge that adds the node provisions it whole.

Scale out is site.yml with spark-3 in the inventory (inventories/sim/nodes_beyond_two.py, SIM_NODES=3): its serving
play starts and warms the new replica before the proxy play names it, and the other replicas' units do not change,
so they are not restarted (their containers keep their ids). Scale in is playbooks/remove_node.yml. Both with 0
failed requests; between them each of the three replicas serves requests sent through the proxy.
"""

from __future__ import annotations

import dataclasses
import os
import time
import urllib.request

import pytest
from test_20_rolling_upgrade import container_id, steady_load

from ansible_collections.gb10.serving.plugins.module_utils import _bench

NEW = "spark-3"
OLD = ("spark-1", "spark-2")

pytestmark = pytest.mark.skipif(
    os.environ.get("GB10_IT_SCALE") != "1", reason="opt-in: make test-scale (GB10_IT_SCALE=1), outside make test"
)


def served_by(sim, node):
    with urllib.request.urlopen(f"{sim.replica_url(node)}/metrics", timeout=5) as answer:
        return _bench.parse_metrics(answer.read().decode()).get("vllm:request_success_total", 0.0)


def test_a_third_node_joins_under_load_serves_and_leaves_under_load(served_sim):
    three = dataclasses.replace(served_sim, env={**served_sim.env, "SIM_NODES": "3"})
    three.script("sim/up.sh")
    before = {node: container_id(three, node) for node in OLD}
    started = time.monotonic()
    with steady_load(three, "scale out: site.yml adds spark-3"):
        three.playbook("site.yml")
    added_s = time.monotonic() - started
    for proxy in three.proxies():
        assert three.backend_states(proxy).get(NEW) == (2, 0), (proxy, three.backend_states(proxy))
    assert {node: container_id(three, node) for node in OLD} == before, "an existing replica was restarted"

    counts = {node: served_by(three, node) for node in (*OLD, NEW)}
    for _request in range(12):
        three.chat("who serves?")
    served = {node: served_by(three, node) - counts[node] for node in counts}
    print(f"\nthrough the proxy after the join, requests per replica (own /metrics): {served}")
    assert all(count > 0 for count in served.values()), served

    started = time.monotonic()
    with steady_load(three, "scale in: remove_node.yml retires spark-3"):
        three.playbook("playbooks/remove_node.yml", {"remove_node": NEW})
    removed_s = time.monotonic() - started
    for proxy in three.proxies():
        assert NEW not in three.backend_states(proxy), (proxy, three.backend_states(proxy))
    enabled = three.exec(NEW, "systemctl", "is-enabled", "gb10-vllm.service", check=False).stdout.strip()
    active = three.exec(NEW, "systemctl", "is-active", "gb10-vllm.service", check=False).stdout.strip()
    assert (enabled, active) == ("disabled", "inactive"), (enabled, active)
    assert {node: container_id(three, node) for node in OLD} == before, "an existing replica was restarted"
    served_sim.wait_all_ready()
    print(f"scale out (site.yml) {added_s:.0f} s, scale in (remove_node.yml) {removed_s:.0f} s")
