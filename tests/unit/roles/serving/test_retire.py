# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/serving/tasks/retire.yml and the topology switch (playbooks/switch_topology.yml, roles/switch_topology): the
old topology is disabled --now, in order, from the units the plan names (plugins/module_utils/_plan/units.py), not from
a table of their own."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[4]
ROLE_VARS = yaml.safe_load((REPO / "roles" / "serving" / "vars" / "main.yml").read_text())
RETIRE = yaml.safe_load((REPO / "roles" / "serving" / "tasks" / "retire.yml").read_text())
SWITCH = yaml.safe_load((REPO / "playbooks" / "switch_topology.yml").read_text())
SWITCH_ROLE = REPO / "roles" / "switch_topology"
SWITCH_STATE = (SWITCH_ROLE / "tasks" / "state.yml").read_text()
SWITCH_VARS = yaml.safe_load((SWITCH_ROLE / "vars" / "main.yml").read_text())

sys.path.insert(0, str(REPO / "tests" / "unit" / "plugins" / "module_utils" / "_plan"))
from _plan_fixtures import plan_mod

SITE = plan_mod.plan(None, {}, {})["units"]


def _phase_tasks():
    block = next(task for task in RETIRE if "block" in task)
    return block["block"]


def test_pitfall_old_watchdog_stops_new_topology():
    # Seed 002: the old topology's watchdog (and any unit left enabled) would start the old unit again, whose
    # Conflicts= stops the new one. Every unit and watchdog of every topology is retired with disable --now.
    phases = SITE["retire_phases"]
    assert sorted(unit for phase in phases for unit in phase) == sorted(SITE["all"])
    found = RETIRE[0]["ansible.builtin.find"]
    assert found["paths"] == "/etc/systemd/system" and found["file_type"] == "any" and found["recurse"] is False
    assert "_serving_plan.units.all" in found["patterns"] and "_serving_node.unit_names" in found["patterns"]
    for task in _phase_tasks():
        module = task["ansible.builtin.systemd_service"]
        assert module["state"] == "stopped"
        assert module["enabled"] is False or "else false" in module["enabled"], task["name"]


def test_retire_order_watchdogs_engines_workers_head():
    # One task per phase: every node finishes a phase before any starts the next; nothing still running sees
    # its peer vanish (a vLLM whose Ray worker is gone dies, and Restart=on-failure would start it again).
    # Within a phase the plan's order holds: a watchdog's timer goes before the service it starts.
    loops = [task["loop"] for task in _phase_tasks()]
    assert loops == [
        f"{{{{ _serving_plan.units.retire_phases[{n}] | select('in', __serving_other_found) | list }}}}"
        for n in range(len(SITE["retire_phases"]))
    ]


def test_the_role_keeps_no_table_of_units():
    assert {k for k in ROLE_VARS if "unit" in k or "watchdog" in k or "conflict" in k} == {
        "_serving_units",
        "_serving_node_watchdogs",
        "_serving_watchdog_bin",
        "_serving_watchdog_lib",  # where the watchdog's imported admission rule is installed: a path, no unit
        # what the handlers and the admission read, each derived from _serving_units (the plan's), no unit named
        "_serving_watchdog_files",
        "_serving_units_running_before",
    }
    assert ROLE_VARS["_serving_units"] == "{{ _serving_node.units | default([]) }}"
    for derived in ("_serving_watchdog_files", "_serving_units_running_before"):
        assert "_serving_units |" in ROLE_VARS[derived] and "gb10-" not in ROLE_VARS[derived], derived


def test_switch_reads_every_unit_that_makes_a_topology_run_from_the_plan():
    play = next(play for play in SWITCH if play.get("name", "").startswith("Switch | what every node runs"))
    assert [task["ansible.builtin.include_role"] for task in play["tasks"]] == [
        {"name": "gb10.serving.switch_topology", "tasks_from": "preflight"},
        {"name": "gb10.serving.switch_topology", "tasks_from": "state"},
    ]
    assert SWITCH_VARS["_switch_topology_plan"] == "{{ gb10_plan }}"
    for read in (
        "_switch_topology_plan.units.all",
        "_switch_topology_plan.nodes[inventory_hostname].unit_names",
        "_switch_topology_plan.units.topologies.replicas",
    ):
        assert read in SWITCH_STATE, read
    assert "gb10-" not in SWITCH_STATE


def test_every_unit_name_is_a_literal_find_pattern():
    # retire.yml finds the other topology's units with one ansible.builtin.find, each name a fnmatch pattern: a glob
    # character in a name would match other files than that unit.
    assert all(not set(unit) & set("*?[]!") for unit in SITE["all"]), SITE["all"]
