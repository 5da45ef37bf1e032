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


def test_pitfall_fabric_far_below_rated_speed_refusal_carries_every_ranks_figure_and_the_floor():
    """The TP preflight's report of the bandwidth (issue 39 item 3): refused or not, its message prints each rank's
    measured figure with the floor (the plan's report says it is printed there)."""
    import yaml

    tasks = yaml.safe_load(
        (Path(__file__).resolve().parents[4] / "roles" / "serving" / "tasks" / "fabric.yml").read_text()
    )
    [measure] = [task for task in tasks if task.get("block")]
    [judge] = [task for task in measure["block"] if task["name"].startswith("Print the measured bandwidth")]
    assert "__serving_fabric_bandwidth.report" in judge["ansible.builtin.assert"]["fail_msg"]
    assert "__serving_fabric_bandwidth.report" in judge["ansible.builtin.assert"]["success_msg"]


def test_pitfall_nccl_builds_differ_recorded_per_node_filter_reads_each_ranks_record():
    from ansible_collections.gb10.serving.plugins.filter.serving_image import FilterModule as ImageFilters

    group = ImageFilters().filters()["serving_image_nccl_group"]
    check = {
        "ranks": ["spark-1", "spark-2"],
        "min_version": "2.30.4",
        "min_source": "the GB10 default",
        "cuda_graphs": True,
    }
    record = {"version": "2.30.4", "sha256": "a" * 64, "library": "/l/libnccl.so.2", "source": "wheel nvidia-nccl-cu13"}
    hostvars = {
        "spark-1": {"__serving_image_nccl": {"nccl": record}},
        "spark-2": {"__serving_image_nccl": {"nccl": record}},
    }
    found = group(hostvars, check)
    assert found["problems"] == [] and found["report"][1].startswith("spark-2: NCCL 2.30.4 (wheel nvidia-nccl-cu13")
    hostvars["spark-2"] = {"__serving_image_nccl": {"nccl": dict(record, sha256="b" * 64)}}
    assert "load different NCCL builds" in group(hostvars, check)["problems"][0]
    # status.yml's record of a node that has none yet (the template's None may reach it as a string)
    hostvars["spark-2"] = {"__status_nccl": {"nccl": "None"}}
    assert group(hostvars, check, "__status_nccl")["report"][1] == (
        "spark-2: no NCCL recorded (roles/serving_image's probe has not run on it)"
    )
    assert group(hostvars, None) == {"problems": [], "report": []}


def test_pitfall_nccl_builds_differ_recorded_per_node_filter_judges_held_images_before_any_change():
    """node_preflight's call: each rank's __serving_image_held_nccl (roles/serving_image/tasks/checks.yml), a rank
    that holds no planned image yet ({nccl: None}, or no checks at all) left to distribute."""
    from ansible_collections.gb10.serving.plugins.filter.serving_image import FilterModule as ImageFilters

    filters = ImageFilters().filters()
    group = filters["serving_image_nccl_group"]
    check = {"ranks": ["spark-1", "spark-2", "spark-3"], "min_version": "2.30.4", "min_source": "x", "cuda_graphs": 1}
    record = {"version": "2.30.4", "sha256": "a" * 64, "library": "/l/libnccl.so.2", "source": "wheel nvidia-nccl-cu12"}
    hostvars = {
        "spark-1": {"__serving_image_held_nccl": {"nccl": record}},
        "spark-2": {"__serving_image_held_nccl": {"nccl": "None"}},
        "spark-3": {},
    }
    assert group(hostvars, check, "__serving_image_held_nccl", True)["problems"] == []
    hostvars["spark-2"] = {"__serving_image_held_nccl": {"nccl": dict(record, version="2.28.9", sha256="b" * 64)}}
    differ, below = group(hostvars, check, "__serving_image_held_nccl", True)["problems"]
    assert "spark-2: NCCL 2.28.9" in differ and "spark-3" not in differ and below.startswith("spark-2: its image")
    held = {"id": "sha256:" + "1" * 64, "layers": []}
    stated = {"local": "gb10/vllm-serving:t", "id": held["id"], "nccl": record}
    assert filters["serving_image_record_nccl"](stated, "gb10/vllm-serving:t", held) == record
    assert filters["serving_image_record_nccl"](stated, "gb10/vllm-serving:u", held) is None
