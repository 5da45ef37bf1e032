# Copyright: gb10.serving maintainers
# Apache-2.0
"""Where each node figure of the plan comes from: the inventory (gb10_stated_facts) or a measurement."""

from __future__ import annotations

import pytest
from _plan_fixtures import node_inputs

SETUP_FACTS = {
    "memtotal_mb": 124608,
    "memory_mb": {"nocache": {"free": 110000, "used": 14608}},
    "processor_nproc": 20,
    "interfaces": ["lo", "enp1s0f0np0", "docker0"],
    "enp1s0f0np0": {"ipv4": {"address": "192.168.200.11", "prefix": "24"}},
    "lo": {"ipv4": {"address": "127.0.0.1", "prefix": "8"}},
    "docker0": {},
}
STATED = {"mem_total_mib": 124608, "mem_available_mib": 117500, "cores": 20, "interfaces": {"eth0": "10.0.0.1/24"}}


def test_measured_figures_from_setup():
    assert node_inputs.measured_from_setup(SETUP_FACTS) == {
        "mem_total_mib": 124608,
        "mem_available_mib": 110000,
        "cores": 20,
        "interfaces": {"enp1s0f0np0": "192.168.200.11/24", "lo": "127.0.0.1/8"},
    }
    assert node_inputs.measured_from_setup(None) == {}


def test_real_node_measured_figures_win_and_are_labelled():
    got = node_inputs.node_input({"gb10_stated_facts": STATED, "ansible_facts": SETUP_FACTS}, use_measured=True)
    assert got["facts"]["mem_available_mib"] == 110000
    assert set(got["facts_source"].values()) == {"measured"}


def test_host_preferring_stated_figures_keeps_them_and_says_so():
    hostvars = {"gb10_stated_facts": STATED, "ansible_facts": SETUP_FACTS, "gb10_node_figures_prefer": "stated"}
    got = node_inputs.node_input(hostvars, use_measured=True)
    assert got["facts"] == STATED
    assert set(got["facts_source"].values()) == {"inventory (preferred over measured)"}
    assert got["facts_measured"]["mem_available_mib"] == 110000


def test_preferring_stated_still_measures_what_the_inventory_leaves_out():
    hostvars = {"gb10_stated_facts": {"cores": 20}, "ansible_facts": SETUP_FACTS, "gb10_node_figures_prefer": "stated"}
    got = node_inputs.node_input(hostvars, use_measured=True)
    assert got["facts"]["cores"] == 20 and got["facts_source"]["cores"] == "inventory (preferred over measured)"
    assert got["facts"]["mem_total_mib"] == 124608 and got["facts_source"]["mem_total_mib"] == "measured"


def test_unknown_preference_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="gb10_node_figures_prefer is 'inventory': give one of measured, stated"):
        node_inputs.node_input({"gb10_node_figures_prefer": "inventory"}, use_measured=True)


def test_offline_plan_uses_inventory_figures():
    got = node_inputs.node_input({"gb10_stated_facts": STATED, "ansible_facts": SETUP_FACTS})
    assert got["facts"] == STATED and set(got["facts_source"].values()) == {"inventory"}
    assert got["hf_cache_dir"] == "/var/lib/gb10/hf-cache" and got["other_work_reserve_gib"] == 0


def test_missing_figure_marked_missing():
    got = node_inputs.node_input({"gb10_stated_facts": {"cores": 20}})
    assert got["facts_source"]["mem_total_mib"] == "missing"
