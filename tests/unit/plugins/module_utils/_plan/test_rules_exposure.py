# Copyright: gb10.serving maintainers
# Apache-2.0
"""Who may reach what (issue 37 item 1): the plan's exposure table, its rules, and the README's table of it."""

from __future__ import annotations

import importlib

from _plan_fixtures import PORTS, REPO, mp, only, replicas, run, shipped_plan, site, tp

exposure_mod = importlib.import_module("ansible_collections.gb10.serving.plugins.module_utils._plan.exposure")
A, B = "192.168.200.11", "192.168.200.12"


def _by_service(plan, host):
    return {entry["service"]: entry for entry in plan["exposure"][host]}


def test_pitfall_invocations_answers_anyone_who_reaches_a_replica_port():
    """vLLM guards only /v1 with its key (/invocations generates without it): a replica's port is fenced to the site's
    own hosts, and the proxy's client port is the one open to anyone."""
    plan = run(replicas())
    assert plan["violations"] == []
    for host in ("spark-a", "spark-b"):
        entries = _by_service(plan, host)
        assert entries["replica"]["fenced"] and entries["replica"]["from"] == [A, B]
        assert entries["replica"]["ports"] == [8000]
        assert entries["warm_agent"]["from"] == [A, B]  # both nodes are proxies
        assert entries["proxy_client"]["fenced"] is False and entries["proxy_client"]["ports"] == [8080]
        assert entries["node_exporter"]["from"] == [A]  # the monitoring node only
        assert entries["proxy_metrics"]["from"] == [A]
    assert _by_service(plan, "spark-a")["prometheus"]["from"] == []  # nobody but its own node
    assert "prometheus" not in _by_service(plan, "spark-b")


def test_exposure_follows_the_groups_the_plan_is_given():
    plan = run(replicas(), site=site(proxies=["spark-b"], monitoring=[]))
    entries = _by_service(plan, "spark-a")
    assert entries["warm_agent"]["from"] == [B]
    assert "proxy_client" not in entries and "node_exporter" not in entries and "prometheus" not in entries
    assert _by_service(plan, "spark-b")["proxy_client"]["ports"] == [8080]


def test_a_listener_on_port_0_is_left_out():
    plan = run(replicas(), site=site(ports={**PORTS, "warm_agent": 0, "proxy_metrics": 0}))
    entries = _by_service(plan, "spark-a")
    assert "warm_agent" not in entries and "proxy_metrics" not in entries


def test_tensor_parallel_adds_the_launchers_ports_on_the_ranks_only_the_head_serves():
    plan = run(mp())
    head, rank = _by_service(plan, "spark-a"), _by_service(plan, "spark-b")
    assert head["tp_group"]["ports"] == [29501] and head["tp_group"]["ranges"] == [[32768, 60999]]
    assert rank["tp_group"]["ports"] == [] and rank["tp_group"]["ranges"] == [[32768, 60999]]
    assert head["tp_group"]["from"] == [A, B]
    assert "replica" in head and "replica" not in rank and "warm_agent" not in rank
    ray = _by_service(run(tp()), "spark-a")["tp_group"]
    assert 6379 in ray["ports"] and ray["ranges"] == [[10002, 10999]]


def test_an_opening_widens_one_service_and_is_printed_with_its_reason():
    opened = [{"service": "prometheus", "from": ["10.1.0.0/16", "10.1.2.3"], "why": "Grafana on the LAN"}]
    plan = run(replicas(), site=site(opened=opened))
    assert plan["violations"] == []
    prometheus = _by_service(plan, "spark-a")["prometheus"]
    assert prometheus["from"] == ["10.1.0.0/16", "10.1.2.3"]
    # nftables takes the sources merged: an address inside an opened subnet would be a conflicting interval
    assert prometheus["nets4"] == ["10.1.0.0/16"] and prometheus["nets6"] == []
    assert _by_service(plan, "spark-a")["replica"]["opened"] == []
    text = plan_text(plan)
    assert "opened to 10.1.0.0/16, 10.1.2.3 on purpose: Grafana on the LAN" in text


def plan_text(plan):
    return importlib.import_module("ansible_collections.gb10.serving.plugins.module_utils._plan").format_plan(plan)


def test_fence_open():
    bad = [
        {"service": "proxy_client", "from": ["10.0.0.1"], "why": "already open"},
        {"service": "replica", "from": ["not-an-address"], "why": "x"},
        {"service": "replica", "from": ["10.0.0.1"], "why": "two lines\nExecStartPre=/bin/sh"},
    ]
    plan = run(replicas(), site=site(opened=bad))
    found = [v for v in plan["violations"] if v["rule"] == "fence_open"]
    assert len(found) == 3, plan["violations"]
    assert "gb10_fence_open[0]" in found[0]["message"] and "service must be one of replica" in found[0]["message"]
    assert "'not-an-address' is not an IPv4 or IPv6 address or CIDR" in found[1]["message"]
    assert "why must say, on one line" in found[2]["message"]


def test_fence_addresses():
    addresses = {"spark-a": A, "spark-b": B, "lb-1": ""}
    violation = only(run(replicas(), site=site(proxies=["lb-1"], addresses=addresses)), "fence_addresses")
    assert violation["node"] == "lb-1" and "Set gb10_fabric_address for lb-1" in violation["message"]


def test_fence_ports_distinct():
    found = run(replicas(), site=site(ports={**PORTS, "warm_agent": 8000}))["violations"]
    assert [(v["rule"], v["node"]) for v in found] == [
        ("fence_ports_distinct", "spark-a"),
        ("fence_ports_distinct", "spark-b"),
    ]
    violation = found[0]
    assert violation["value"] == 8000 and "replica and warm_agent" in violation["message"]
    assert "gb10_warm_agent_port" in violation["message"]
    # a single port inside the mp launcher's ephemeral range is a clash too
    inside = run(mp(), site=site(ports={**PORTS, "node_exporter": 40000}))
    assert [v["value"] for v in inside["violations"] if v["rule"] == "fence_ports_distinct"] == [40000, 40000]


def test_the_sim_opens_the_replica_port_and_prometheus_to_its_controller_only():
    plan = shipped_plan("sim", "sim-replicas")
    assert plan["violations"] == []
    spark1 = _by_service(plan, "spark-1")
    assert spark1["replica"]["from"] == ["10.77.0.11", "10.77.0.12", "10.77.0.128"]
    assert spark1["prometheus"]["from"] == ["10.77.0.128"]
    assert "10.77.0.128" not in spark1["warm_agent"]["from"] and "10.77.0.128" not in spark1["node_exporter"]["from"]


def test_the_readme_table_is_the_plans_own():
    """One source: the README's table of who may reach what is exposure.markdown_rows(), row for row."""
    readme = (REPO / "README.md").read_text()
    for row in exposure_mod.markdown_rows():
        assert row in readme, row
