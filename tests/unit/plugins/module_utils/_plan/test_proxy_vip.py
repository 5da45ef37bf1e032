# Copyright: gb10.serving maintainers
# Apache-2.0
"""The floating proxy address plan: unicast peers, priorities, and every refusal at once with node and fix."""

from __future__ import annotations

import pytest

from ansible_collections.gb10.serving.plugins.module_utils._plan import format_violations
from ansible_collections.gb10.serving.plugins.module_utils._plan import proxy_vip as vip

HOSTS = ["spark-a", "spark-b"]


def nodes(**overrides):
    base = {
        "spark-a": {
            "fabric_address": "192.168.200.11",
            "fabric_interface": "enp1s0f0np0",
            "vip_interface": "enP7s7",
            "interfaces": {"enp1s0f0np0": "192.168.200.11/24", "enP7s7": "192.168.1.21/24"},
        },
        "spark-b": {
            "fabric_address": "192.168.200.12",
            "fabric_interface": "enp1s0f0np0",
            "vip_interface": "enP7s7",
            "interfaces": {"enp1s0f0np0": "192.168.200.12/24", "enP7s7": "192.168.1.22/24"},
        },
    }
    for host, changes in overrides.items():
        base[host.replace("_", "-")] = {**base[host.replace("_", "-")], **changes}
    return base


def rules(planned):
    return sorted((v["node"], v["rule"]) for v in planned["violations"])


def test_each_node_advertises_unicast_to_the_others_fabric_addresses():
    planned = vip.plan("192.168.1.20", 24, HOSTS, nodes())
    assert planned["violations"] == []
    assert planned["address"] == "192.168.1.20" and planned["prefix"] == 24
    assert planned["nodes"]["spark-a"] == {
        "unicast_src_ip": "192.168.200.11",
        "unicast_peers": ["192.168.200.12"],
        "priority": 150,
        "interface": "enp1s0f0np0",
        "vip_interface": "enP7s7",
    }
    assert planned["nodes"]["spark-b"]["unicast_peers"] == ["192.168.200.11"]
    assert planned["nodes"]["spark-b"]["priority"] == 140


def test_three_proxies_each_peer_with_the_other_two():
    three = {**nodes(), "spark-c": {**nodes()["spark-b"], "fabric_address": "192.168.200.13"}}
    three["spark-c"]["interfaces"] = {"enp1s0f0np0": "192.168.200.13/24", "enP7s7": "192.168.1.23/24"}
    planned = vip.plan("192.168.1.20", 24, [*HOSTS, "spark-c"], three)
    assert planned["violations"] == []
    assert planned["nodes"]["spark-c"]["unicast_peers"] == ["192.168.200.11", "192.168.200.12"]
    assert [planned["nodes"][h]["priority"] for h in ("spark-a", "spark-b", "spark-c")] == [150, 140, 130]


def test_a_stated_priority_wins_over_the_group_order():
    planned = vip.plan("192.168.1.20", 24, HOSTS, nodes(spark_b={"priority": 200}))
    assert planned["nodes"]["spark-b"]["priority"] == 200 and planned["nodes"]["spark-a"]["priority"] == 150


def test_the_address_lands_on_the_fabric_interface_when_no_other_is_named():
    same = nodes(spark_a={"vip_interface": None}, spark_b={"vip_interface": None})
    planned = vip.plan("192.168.200.10", 24, HOSTS, same)
    assert planned["violations"] == []
    assert planned["nodes"]["spark-a"]["vip_interface"] == "enp1s0f0np0"


def test_pitfall_proxy_on_one_node_takes_the_endpoint_down_with_it():
    # Seed 002: "either node can restart without taking the model down" holds for the replicas, not for a proxy
    # that lives on one of them; a floating address over one proxy would only hide that.
    planned = vip.plan("192.168.1.20", 24, ["spark-a"], nodes())
    assert ("all", "peers") in rules(planned)
    message = next(v["message"] for v in planned["violations"] if v["rule"] == "peers")
    assert "has 1 (spark-a)" in message and "add the other nodes to gb10_proxy" in message


@pytest.mark.parametrize(
    ("address", "prefix", "fragment"),
    [
        ("192.168.1.300", 24, "not an IP address"),
        ("fe80::10", 64, "IPv6"),
        ("192.168.1.0", 24, "network address"),
        ("192.168.1.255", 24, "broadcast address"),
        ("192.168.1.20", 33, "1..32"),
        ("192.168.1.20", "x", "not a prefix length"),
    ],
)
def test_a_malformed_address_is_refused_with_the_reason(address, prefix, fragment):
    planned = vip.plan(address, prefix, HOSTS, nodes())
    assert any(v["rule"] == "address" and fragment in v["message"] for v in planned["violations"]), planned


def test_a_nodes_own_address_is_not_a_floating_address():
    planned = vip.plan(
        "192.168.1.22", 24, HOSTS, nodes(), other_addresses={"spark-a": "192.168.200.11", "db": "192.168.1.22"}
    )
    assert ("db", "address") in rules(planned)


def test_a_nodes_own_fabric_address_is_named_once():
    same = nodes(spark_a={"vip_interface": None}, spark_b={"vip_interface": None})
    planned = vip.plan("192.168.200.11", 24, HOSTS, same, other_addresses={"spark-a": "192.168.200.11"})
    assert rules(planned) == [("spark-a", "address")]


def test_a_nodes_own_client_address_is_not_a_floating_address():
    planned = vip.plan("192.168.1.22", 24, HOSTS, nodes())
    assert rules(planned) == [("spark-b", "address")]
    assert "own address on enP7s7" in planned["violations"][0]["message"]


def test_an_address_outside_the_client_subnet_is_refused_with_that_subnet():
    planned = vip.plan("10.0.0.20", 24, HOSTS, nodes())
    assert rules(planned) == [("spark-a", "vip_subnet"), ("spark-b", "vip_subnet")]
    assert "outside enP7s7's subnet 192.168.1.0/24" in planned["violations"][0]["message"]


def test_a_prefix_other_than_the_interfaces_names_the_right_one():
    planned = vip.plan("192.168.1.20", 16, HOSTS, nodes())
    assert any("set proxy_vip_prefix: 24" in v["message"] for v in planned["violations"])


def test_an_interface_the_node_does_not_have_is_named_with_those_it_has():
    planned = vip.plan("192.168.1.20", 24, HOSTS, nodes(spark_b={"vip_interface": "eth9"}))
    assert rules(planned) == [("spark-b", "vip_interface")]
    assert "(enP7s7, enp1s0f0np0)" in planned["violations"][0]["message"]


def test_a_concrete_bind_address_is_refused():
    planned = vip.plan("192.168.1.20", 24, HOSTS, nodes(), bind_address="192.168.1.21")
    assert ("all", "bind") in rules(planned)
    assert "gb10_proxy_bind_address: '*'" in planned["violations"][0]["message"]


@pytest.mark.parametrize("bind", ["*", "0.0.0.0", "::", ""])
def test_wildcard_binds_take_the_address_on_any_node(bind):
    assert vip.plan("192.168.1.20", 24, HOSTS, nodes(), bind_address=bind)["violations"] == []


def test_every_violation_at_once():
    broken = nodes(spark_a={"fabric_address": None}, spark_b={"priority": 255, "vip_interface": "eth9"})
    planned = vip.plan("192.168.1.20", 24, HOSTS, broken, virtual_router_id=0, advert_int=0, bind_address="10.1.1.1")
    assert rules(planned) == [
        ("all", "advert_int"),
        ("all", "bind"),
        ("all", "virtual_router_id"),
        ("spark-a", "unicast_src"),
        ("spark-b", "priority"),
        ("spark-b", "vip_interface"),
    ]
    text = format_violations(planned["violations"], "the floating proxy address")
    assert text.startswith("6 violation(s) of the floating proxy address; nothing was changed:")


def test_two_nodes_with_one_fabric_address_are_refused():
    planned = vip.plan("192.168.1.20", 24, HOSTS, nodes(spark_b={"fabric_address": "192.168.200.11"}))
    assert ("spark-b", "unicast_src") in rules(planned)


# --- one test per rule of rules_proxy_vip.py, named after the rule ----------------------------------------


def _only(planned, rule):
    assert [v["rule"] for v in planned["violations"]] == [rule], planned["violations"]
    return planned["violations"][0]


def test_address():
    violation = _only(vip.plan("192.168.1.0", 24, HOSTS, nodes()), "address")
    assert violation["node"] == "all" and "network address of 192.168.1.0/24" in violation["message"]
    violation = _only(vip.plan("192.168.1.21", 24, HOSTS, nodes()), "address")
    assert violation["node"] == "spark-a" and "own address on enP7s7" in violation["message"]


def test_peers():
    violation = _only(vip.plan("192.168.1.20", 24, ["spark-a"], nodes()), "peers")
    assert violation["value"] == 1 and "add the other nodes to gb10_proxy" in violation["message"]


def test_virtual_router_id():
    violation = _only(vip.plan("192.168.1.20", 24, HOSTS, nodes(), virtual_router_id=256), "virtual_router_id")
    assert violation["value"] == 256 and "1..255" in violation["message"]


def test_advert_int():
    violation = _only(vip.plan("192.168.1.20", 24, HOSTS, nodes(), advert_int="often"), "advert_int")
    assert violation["value"] == "often"


def test_bind():
    violation = _only(vip.plan("192.168.1.20", 24, HOSTS, nodes(), bind_address="192.168.1.21"), "bind")
    assert violation["value"] == "192.168.1.21" and "gb10_proxy_bind_address: '*'" in violation["message"]


def test_unicast_src():
    violation = _only(vip.plan("192.168.1.20", 24, HOSTS, nodes(spark_b={"fabric_address": "fabric"})), "unicast_src")
    assert violation["node"] == "spark-b" and violation["value"] == "fabric"


def test_priority():
    violation = _only(vip.plan("192.168.1.20", 24, HOSTS, nodes(spark_a={"priority": 300})), "priority")
    assert violation["node"] == "spark-a" and violation["value"] == 300


def test_interface():
    planned = vip.plan("192.168.1.20", 24, HOSTS, nodes(spark_b={"fabric_interface": None}))
    violation = _only(planned, "interface")
    assert violation["node"] == "spark-b" and "gb10_fabric_interface is unset" in violation["message"]


def test_vip_interface():
    violation = _only(vip.plan("192.168.1.20", 24, HOSTS, nodes(spark_a={"vip_interface": "wlan0"})), "vip_interface")
    assert violation["value"] == "wlan0" and "enP7s7, enp1s0f0np0" in violation["message"]


def test_vip_subnet():
    planned = vip.plan("192.168.1.20", 25, HOSTS, nodes())
    assert [(v["node"], v["rule"], v["value"]) for v in planned["violations"]] == [
        ("spark-a", "vip_subnet", 25),
        ("spark-b", "vip_subnet", 25),
    ]
    assert "set proxy_vip_prefix: 24" in planned["violations"][0]["message"]


def test_interface_name():
    planned = vip.plan("192.168.1.20", 24, HOSTS, nodes(spark_b={"vip_interface": "enP7s7\n    dev evil"}))
    assert ("spark-b", "interface_name") in rules(planned)
    violation = next(v for v in planned["violations"] if v["rule"] == "interface_name")
    assert violation["value"] == "enP7s7\n    dev evil" and "keepalived.conf" in violation["message"]
