# Copyright: gb10.serving maintainers
# Apache-2.0
"""Filters of the fabric measured before a split (issue 39 item 3), over what the ranks registered."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.gb10.serving.plugins.filter.fabric_split import FilterModule

F = FilterModule().filters()
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "fabric"
FABRIC = {
    "head": "spark-1",
    "ranks": {
        "spark-1": {"interface": "eth0", "address": "10.77.0.11"},
        "spark-2": {"interface": "eth0", "address": "10.77.0.12"},
    },
    "mtu": None,
    "bandwidth_floor_gbit": 1.0,
    "measure_seconds": 3,
}


def _read(name):
    return (FIXTURES / name).read_text()


def test_pitfall_fabric_mtu_mismatch_refused_from_registered_links():
    hostvars = {
        "spark-1": {"__node_preflight_fabric_link": {"rc": 0, "stdout": _read("ip_j_link_show_eth0_up_mtu1500.json")}},
        "spark-2": {"__node_preflight_fabric_link": {"rc": 0, "stdout": _read("ip_j_link_show_eth0_up_mtu1400.json")}},
    }
    (problem,) = F["fabric_link_problems"](hostvars, FABRIC)
    assert "differ in MTU (spark-1 1500, spark-2 1400)" in problem
    # no such interface: ip prints nothing on stdout
    hostvars["spark-2"]["__node_preflight_fabric_link"] = {
        "rc": 1,
        "stdout": "",
        "stderr": 'Device "eth0" does not exist.',
    }
    (problem,) = F["fabric_link_problems"](hostvars, FABRIC)
    assert problem.startswith("spark-2: the fabric interface eth0 does not exist")
    assert F["fabric_link_problems"](hostvars, None) == []


def test_pitfall_fabric_far_below_rated_speed_from_registered_iperf3():
    hostvars = {
        "spark-1": {"__serving_fabric_iperf3": {"skipped": True}},
        "spark-2": {"__serving_fabric_iperf3": {"rc": 0, "stdout": _read("iperf3_3.12_json_veth_sim_3s.json")}},
    }
    found = F["fabric_bandwidth"](hostvars, FABRIC)
    assert found == {"problems": [], "report": ["spark-2 -> spark-1: 9.99 Gbit/s (floor 1 Gbit/s)"]}
    found = F["fabric_bandwidth"](hostvars, dict(FABRIC, bandwidth_floor_gbit=25.0))
    assert len(found["problems"]) == 1 and "below the profile's floor 25 Gbit/s" in found["problems"][0]
    assert F["fabric_bandwidth"](hostvars, None) == {"problems": [], "report": []}
