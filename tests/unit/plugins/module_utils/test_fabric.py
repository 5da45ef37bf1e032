# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 39, item 3: a fabric that links at a fraction of its speed, an MTU that differs between the ranks, a wrong
interface (NVIDIA/dgx-spark-playbooks#102), judged from real ``ip -j link`` and ``iperf3 --json`` output."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.gb10.serving.plugins.module_utils import _fabric as fabric

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "fabric"


def _read(name):
    return (FIXTURES / name).read_text()


def test_link_reads_ip_json():
    found = fabric.link(_read("ip_j_link_show_eth0_up_mtu1500.json"))
    assert found["ifname"] == "eth0" and found["mtu"] == 1500 and found["up"]
    assert fabric.link("[]") is None and fabric.link("") is None


def test_iperf3_reads_the_received_rate():
    """iperf3 3.12 --json, 3 s of one TCP stream between two sim nodes over their veth (measured 2026-12-05)."""
    gbit, error = fabric.iperf3_gbit(_read("iperf3_3.12_json_veth_sim_3s.json"))
    assert error is None and 9.0 < gbit < 11.0
    gbit, error = fabric.iperf3_gbit(_read("iperf3_3.12_json_connection_refused.json"))
    assert gbit is None and error == "unable to connect to server: Connection refused"
    assert fabric.iperf3_gbit("not json") == (None, "iperf3 printed no JSON")


def _ranks(**mtus):
    ranks = {}
    for host, name in mtus.items():
        ranks[host] = {"ifname": "eth0", "link": fabric.link(_read(name)) if name else None}
    return ranks


def test_pitfall_fabric_mtu_mismatch_refused():
    ranks = _ranks(
        **{"spark-1": "ip_j_link_show_eth0_up_mtu1500.json", "spark-2": "ip_j_link_show_eth0_up_mtu1400.json"}
    )
    (problem,) = fabric.link_problems(ranks, None)
    assert problem.startswith("the tensor-parallel ranks' fabric interfaces differ in MTU (spark-1 1500, spark-2 1400)")
    (problem,) = fabric.link_problems(ranks, 1500)
    assert problem.startswith("spark-2: the fabric interface eth0 has MTU 1400, the plan states 1500 on every rank")
    assert "ip link set dev eth0 mtu 1500" in problem
    same = _ranks(
        **{"spark-1": "ip_j_link_show_eth0_up_mtu1500.json", "spark-2": "ip_j_link_show_eth0_up_mtu1500.json"}
    )
    assert fabric.link_problems(same, None) == [] and fabric.link_problems(same, 1500) == []


def test_pitfall_fabric_wrong_interface_or_down_refused():
    (problem,) = fabric.link_problems({"spark-2": {"ifname": "enp1s0f1np1", "link": None}}, None)
    assert problem.startswith("spark-2: the fabric interface enp1s0f1np1 does not exist")
    # this machine's docker0: administratively UP without a carrier (NO-CARRIER, operstate DOWN)
    import json

    everything = json.loads(_read("ip_j_link_show_all_host.json"))
    docker0 = next(entry for entry in everything if entry["ifname"] == "docker0")
    down = fabric.link(json.dumps([docker0]))
    assert not down["up"]
    (problem,) = fabric.link_problems({"spark-1": {"ifname": "docker0", "link": down}}, None)
    assert "is not up (operstate DOWN" in problem


def test_pitfall_fabric_far_below_rated_speed_refused():
    measured = {"spark-2": fabric.iperf3_gbit(_read("iperf3_3.12_json_veth_sim_3s.json"))}
    assert fabric.bandwidth_problems(measured, 5.0, "spark-1") == []
    (problem,) = fabric.bandwidth_problems(measured, fabric.DEFAULT_FLOOR_GBIT, "spark-1")
    assert problem.startswith("spark-2: 9.99 Gbit/s to spark-1 over the fabric (iperf3, one TCP stream) is below")
    assert "floor 25 Gbit/s" in problem and "dgx-spark-playbooks#102" in problem
    assert fabric.report(measured, 25.0, "spark-1") == ["spark-2 -> spark-1: 9.99 Gbit/s (floor 25 Gbit/s)"]
    refused = {"spark-2": fabric.iperf3_gbit(_read("iperf3_3.12_json_connection_refused.json"))}
    (problem,) = fabric.bandwidth_problems(refused, 25.0, "spark-1")
    assert "could not be measured (iperf3: unable to connect to server: Connection refused)" in problem
