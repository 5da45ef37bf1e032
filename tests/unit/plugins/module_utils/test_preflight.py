from ansible_collections.gb10.serving.plugins.module_utils._preflight import collect, fabric_problems

# The shape of ansible.builtin.setup's network facts on a sim node (eth0 10.77.0.12/24), trimmed.
FACTS = {
    "all_ipv4_addresses": ["10.77.0.12", "172.17.0.1"],
    "all_ipv6_addresses": ["fe80::42:aff:fe4d:c%eth0"],
    "interfaces": ["lo", "eth0", "docker0"],
    "eth0": {"device": "eth0", "ipv4": {"address": "10.77.0.12", "netmask": "255.255.255.0"}},
    "docker0": {"device": "docker0", "ipv4": {"address": "172.17.0.1", "netmask": "255.255.0.0"}},
}


def test_fabric_address_held_on_its_interface_passes():
    assert fabric_problems(FACTS, "spark-2", "10.77.0.12", "eth0") == []
    assert fabric_problems(FACTS, "spark-2", "", "eth0") == []


def test_fabric_address_of_another_node_is_refused_with_what_the_node_holds():
    (msg,) = fabric_problems(FACTS, "spark-2", "10.77.0.11", "eth0")
    assert msg.startswith("spark-2: gb10_fabric_address 10.77.0.11 is not one of the node's addresses")
    assert "10.77.0.12" in msg and "Fix:" in msg


def test_fabric_address_on_the_wrong_interface_is_refused():
    (msg,) = fabric_problems(FACTS, "spark-2", "172.17.0.1", "eth0")
    assert "is not on gb10_fabric_interface eth0 (which has 10.77.0.12)" in msg


def test_fabric_interface_missing_and_address_malformed():
    assert "does not exist on the node" in fabric_problems(FACTS, "spark-2", "10.77.0.12", "enp1s0f0np0")[0]
    assert "is not an IP address" in fabric_problems(FACTS, "spark-2", "10.77.0.12\nlisten x", "eth0")[0]


def test_collect_keeps_node_then_role_order_and_skips_missing():
    hostvars = {
        "spark-1": {"__model_weights_problems": ["spark-1: the hub has no revision"]},
        "spark-2": {"__memory_guard_problems": ["spark-2: earlyoom would not fire"], "__fab": ["spark-2: fabric"]},
    }
    got = collect(hostvars, ["spark-1", "spark-2"], ["memory_guard", "model_weights"], "__fab")
    assert got == ["spark-1: the hub has no revision", "spark-2: earlyoom would not fire", "spark-2: fabric"]
