# Copyright: gb10.serving maintainers
# Apache-2.0
"""The maintenance drain's decisions (playbooks/drain.yml): which servers, and whether draining them is allowed,
from every proxy's view as HAProxy's own `show servers state` gives it."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.gb10.serving.plugins.filter.fleet import FilterModule
from ansible_collections.gb10.serving.plugins.module_utils import _drain, _haproxy

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "haproxy"
# Debian bookworm's haproxy 2.6.12 in the simulation: spark-1 UP and READY, spark-2 UP and DRAINED.
ONE_DRAINED = _haproxy.parse_servers_state((FIXTURES / "haproxy_2.6_gb10_drained.txt").read_text())
F = FilterModule().filters()


def ready(*names, up=True):
    return [{"name": n, "operational": "running" if up else "stopped", "up": up, "admin": "ready"} for n in names]


@pytest.mark.parametrize(
    ("given", "names"),
    [("spark-2", ["spark-2"]), (" spark-2 , spark-3,spark-2,", ["spark-2", "spark-3"]), (["spark-1"], ["spark-1"])],
)
def test_server_names(given, names):
    assert _drain.server_names(given) == names


@pytest.mark.parametrize("given", [None, "", " , ", []])
def test_no_server_is_refused_with_the_fix(given):
    with pytest.raises(ValueError, match=r"-e drain_servers=<name>"):
        _drain.server_names(given)


def test_draining_one_of_two_serving_replicas_is_allowed():
    views = {"spark-1": ready("spark-1", "spark-2"), "spark-2": ready("spark-1", "spark-2")}
    found = _drain.verdict(["spark-2"], views)
    assert found["ok"] and found["serving_after"] == ["spark-1"], found
    assert found["msg"] == "draining spark-2: spark-1 keep serving"


def test_draining_the_last_serving_replica_is_refused_unless_forced():
    views = {"spark-1": ONE_DRAINED}
    found = _drain.verdict(["spark-1"], views)
    assert not found["ok"]
    assert found["msg"].startswith("draining spark-1 would leave no replica serving: up and ready in every proxy now:")
    assert "spark-1 running/ready, spark-2 running/drain" in found["msg"]
    assert "-e drain_force=true" in found["msg"] and "playbooks/ready.yml" in found["msg"]
    assert found["msg"].endswith("Nothing was changed")
    forced = _drain.verdict(["spark-1"], views, force=True)
    assert forced["ok"] and forced["msg"].startswith("forced (drain_force): draining spark-1 leaves no replica")


def test_a_replica_up_in_one_proxy_only_does_not_count_as_serving():
    # With the floating address every node runs a proxy: spark-2 counts only where every proxy holds it up.
    views = {"spark-1": ready("spark-1", "spark-2"), "spark-2": ready("spark-1") + ready("spark-2", up=False)}
    found = _drain.verdict(["spark-1"], views)
    assert not found["ok"] and found["serving_before"] == ["spark-1"], found


def test_draining_both_of_two_is_refused():
    views = {"spark-1": ready("spark-1", "spark-2")}
    assert not _drain.verdict(["spark-1", "spark-2"], views)["ok"]


def test_a_server_some_proxy_does_not_front_is_refused_even_forced():
    views = {"spark-1": ready("spark-1", "spark-2"), "spark-2": ready("spark-1", "spark-2")}
    found = _drain.verdict(["spark-3"], views, force=True)
    assert not found["ok"] and found["unknown"] == {"spark-1": ["spark-3"], "spark-2": ["spark-3"]}
    assert found["msg"].startswith("spark-1: backend has no server spark-3 (its servers: spark-1 running/ready")
    assert found["msg"].endswith("Nothing was changed")


def test_draining_again_is_allowed_and_said():
    views = {"spark-1": [*ready("spark-1"), dict(ready("spark-2")[0], admin="drain")]}
    found = _drain.verdict(["spark-2"], views)
    assert found["ok"] and found["already"] == ["spark-2"] and "(spark-2 already held)" in found["msg"]


def test_no_proxy_is_refused():
    assert not _drain.verdict(["spark-2"], {})["ok"]


def test_filter_parses_then_decides():
    views = {"spark-1": ready("spark-1", "spark-2")}
    assert F["drain_verdict"]("spark-2", views, "false")["names"] == ["spark-2"]
    assert F["drain_verdict"]("spark-1,spark-2", views, "true")["ok"]
    refused = F["drain_verdict"]("", views)
    assert not refused["ok"] and refused["names"] == [] and "drain_servers" in refused["msg"]


NODES = ["spark-1", "spark-2", "spark-3"]
PROXIES = ["spark-1", "spark-2"]


def test_removing_the_third_of_three_replicas_is_allowed():
    found = _drain.removal_verdict(["spark-3"], NODES, NODES, PROXIES, [], "replicas")
    assert found["ok"] and found["remaining"] == ["spark-1", "spark-2"]
    assert found["msg"] == "removing spark-3: spark-1, spark-2 keep serving"


def test_removal_below_what_a_rolling_upgrade_needs_is_refused_unless_forced():
    two = NODES[:2]
    found = _drain.removal_verdict(["spark-2"], two, two, ["spark-1"], [], "replicas")
    assert not found["ok"]
    assert found["msg"].startswith(
        "removing spark-2 leaves 1 replica(s) (spark-1) of 2: a rolling upgrade needs 2, one serving while another"
    )
    assert "-e remove_node_force=true" in found["msg"] and found["msg"].endswith("Nothing was changed")
    forced = _drain.removal_verdict(["spark-2"], two, two, ["spark-1"], [], "replicas", force=True)
    assert forced["ok"] and "forced: fewer than the 2 a rolling upgrade needs" in forced["msg"]


def test_removal_of_a_proxy_or_monitoring_node_or_a_stranger_is_refused_even_forced():
    proxy = _drain.removal_verdict(["spark-2"], NODES, NODES, PROXIES, ["spark-2"], "replicas", force=True)
    assert not proxy["ok"] and proxy["msg"].startswith("spark-2 runs a proxy and the monitoring: move it to another")
    stranger = _drain.removal_verdict(["spark-9"], NODES, NODES, PROXIES, [], "replicas", force=True)
    assert not stranger["ok"] and stranger["msg"].startswith("spark-9: not a node of this inventory's gb10_nodes")
    split = _drain.removal_verdict(["spark-3"], NODES, ["spark-1"], PROXIES, [], "tensor_parallel", force=True)
    assert not split["ok"] and "playbooks/switch_topology.yml" in split["msg"]


def test_removal_filter_parses_the_names():
    found = F["removal_verdict"]("spark-3", NODES, NODES, PROXIES, [], "replicas", "false")
    assert found["ok"] and found["names"] == ["spark-3"]
    assert "remove_node" in F["removal_verdict"]("", NODES, NODES, PROXIES, [], "replicas")["msg"]
