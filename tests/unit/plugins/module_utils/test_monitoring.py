# Copyright: gb10.serving maintainers
# Apache-2.0
"""What roles/monitoring's Prometheus scrapes, from the serving plan (plugins/module_utils/_monitoring.py)."""

from __future__ import annotations

import pytest

from ansible_collections.gb10.serving.plugins.filter.monitoring import FilterModule
from ansible_collections.gb10.serving.plugins.module_utils import _monitoring

PLAN = {
    "serving_hosts": ["spark-1", "spark-2"],
    "nodes": {"spark-2": {"port": 8000}, "spark-1": {"port": 8000}},
}
ADDRESSES = {"spark-1": "10.77.0.11", "spark-2": "10.77.0.12"}


def test_pitfall_metrics_through_proxy_every_replica_scraped_on_its_own_address():
    # Seed 002: /metrics read through the proxy came from either replica in turn and the counters jumped. Each
    # replica is its own target, on its fabric address and the plan's port; the proxy is a target of its own.
    out = _monitoring.targets(PLAN, ADDRESSES, 9100, {"spark-1": 8405})
    assert out["vllm"] == [
        {"targets": ["10.77.0.11:8000"], "labels": {"job": "vllm", "node": "spark-1"}},
        {"targets": ["10.77.0.12:8000"], "labels": {"job": "vllm", "node": "spark-2"}},
    ]
    assert out["haproxy"] == [{"targets": ["10.77.0.11:8405"], "labels": {"job": "haproxy", "node": "spark-1"}}]
    assert [t["targets"] for t in out["node"]] == [["10.77.0.11:9100"], ["10.77.0.12:9100"]]


def test_tensor_parallel_scrapes_the_head_and_every_exporter():
    plan = {"serving_hosts": ["spark-1"], "nodes": {"spark-1": {"port": 8000}, "spark-2": {"port": None}}}
    out = _monitoring.targets(plan, ADDRESSES, 9100, {})
    assert [t["labels"]["node"] for t in out["vllm"]] == ["spark-1"]
    assert [t["labels"]["node"] for t in out["node"]] == ["spark-1", "spark-2"]
    assert out["haproxy"] == []


def test_a_proxy_without_an_endpoint_is_not_scraped():
    out = _monitoring.targets(PLAN, ADDRESSES, 9100, {"spark-1": 0, "spark-2": 8405})
    assert [t["labels"]["node"] for t in out["haproxy"]] == ["spark-2"]


def test_ipv6_fabric_address_is_bracketed():
    out = _monitoring.targets(PLAN, {"spark-1": "fd00::1", "spark-2": "fd00::2"}, 9100, {})
    assert out["vllm"][0]["targets"] == ["[fd00::1]:8000"]


@pytest.mark.parametrize(
    ("addresses", "ports", "exporter", "words"),
    [
        ({"spark-1": "10.77.0.11"}, {}, 9100, ["spark-2", "gb10_fabric_address"]),
        ({**ADDRESSES, "spark-2": "eth0"}, {}, 9100, ["spark-2", "'eth0'"]),
        (ADDRESSES, {"spark-1": "8405"}, 9100, ["gb10_proxy_metrics_port of spark-1", "'8405'"]),
        (ADDRESSES, {}, 70000, ["monitoring_node_exporter_port", "70000"]),
    ],
)
def test_refusals_name_the_host_and_the_fix(addresses, ports, exporter, words):
    with pytest.raises(ValueError) as refused:
        _monitoring.targets(PLAN, addresses, exporter, ports)
    for word in words:
        assert word in str(refused.value)


def test_filter_wraps_refusals():
    from ansible.errors import AnsibleFilterError

    monitoring_targets = FilterModule().filters()["monitoring_targets"]
    assert monitoring_targets(PLAN, ADDRESSES, "9100")["node"][0]["targets"] == ["10.77.0.11:9100"]
    with pytest.raises(AnsibleFilterError, match="spark-2"):
        monitoring_targets(PLAN, {"spark-1": "10.77.0.11"}, 9100)
