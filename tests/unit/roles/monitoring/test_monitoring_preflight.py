# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/monitoring's preflight, run by the real ansible-playbook as the role runs it (its defaults, its
vars/main.yml, the monitoring_targets filter): what it derives from the plan, and what it refuses before any
change, with the node and the fix."""

from __future__ import annotations

import pytest
import yaml
from task_file_runner import run_role_tasks

PLAN = {
    "serving_hosts": ["localhost", "spark-2"],
    "nodes": {"localhost": {"port": 8000}, "spark-2": {"port": 8000}},
}


def preflight(tmp_path, monitoring=("localhost",), spark2=None, **variables):
    hosts = {
        "localhost": {"ansible_connection": "local", "gb10_fabric_address": "10.77.0.11"},
        "spark-2": {"gb10_fabric_address": "10.77.0.12"} if spark2 is None else spark2,
    }
    children = {"gb10_proxy": {"hosts": {"localhost": None}}}
    if monitoring:
        children["gb10_monitoring"] = {"hosts": dict.fromkeys(monitoring)}
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": hosts, "children": children}}))
    return run_role_tasks(
        tmp_path,
        "monitoring",
        "preflight",
        {"gb10_plan": PLAN, **variables},
        name="monitoring preflight",
        args=("-v", "-i", str(inventory)),
    )


def test_targets_from_the_plan_each_replica_on_its_own_address(tmp_path):
    rc, out = preflight(tmp_path)
    assert rc == 0, out
    for target in ("10.77.0.11:8000", "10.77.0.12:8000", "10.77.0.11:8405", "10.77.0.12:9100"):
        assert target in out, target


def test_no_prometheus_node_is_refused_with_the_group_to_add(tmp_path):
    rc, out = preflight(tmp_path, monitoring=())
    assert rc != 0 and "group gb10_monitoring" in out and "none" in out, out


def test_a_node_without_a_fabric_address_is_refused_by_name(tmp_path):
    rc, out = preflight(tmp_path, spark2={})
    assert rc != 0 and "spark-2 has no usable gb10_fabric_address" in out, out


@pytest.mark.parametrize(
    "variables",
    [
        {"monitoring_retention_time": "30 days"},
        {"monitoring_retention_size": "20G"},
        {"monitoring_rate_window": "1"},
        {"monitoring_prometheus_port": 8000},
        {"monitoring_node_exporter_port": 8405},
    ],
)
def test_values_prometheus_would_not_take_are_refused(tmp_path, variables):
    rc, out = preflight(tmp_path, **variables)
    assert rc != 0 and "localhost: monitoring_" in out, out
