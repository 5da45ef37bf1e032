# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/serving/tasks/retire.yml and playbooks/switch_topology.yml: the old topology is disabled --now, in order."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[4]
ROLE_VARS = yaml.safe_load((REPO / "roles" / "serving" / "vars" / "main.yml").read_text())
RETIRE = yaml.safe_load((REPO / "roles" / "serving" / "tasks" / "retire.yml").read_text())
SWITCH = yaml.safe_load((REPO / "playbooks" / "switch_topology.yml").read_text())


def _phase_tasks():
    block = next(task for task in RETIRE if "block" in task)
    return block["block"]


def test_pitfall_old_watchdog_stops_new_topology():
    # Seed 002: the old topology's watchdog (and any unit left enabled) would start the old unit again, whose
    # Conflicts= stops the new one. Every unit and watchdog of every topology is retired with disable --now.
    units = {unit for unit_set in ROLE_VARS["_serving_unit_sets"].values() for unit in unit_set}
    phases = ROLE_VARS["_serving_retire_phases"]
    assert sorted(unit for phase in phases for unit in phase) == sorted(units)
    for task in _phase_tasks():
        module = task["ansible.builtin.systemd_service"]
        assert module["state"] == "stopped"
        assert module["enabled"] is False or "else false" in module["enabled"], task["name"]


def test_retire_order_watchdogs_engines_workers_head():
    # One task per phase: every node finishes a phase before any starts the next; nothing still running sees
    # its peer vanish (a vLLM whose Ray worker is gone dies, and Restart=on-failure would start it again).
    phases = ROLE_VARS["_serving_retire_phases"]
    assert all(unit.startswith("gb10-watchdog-") for unit in phases[0])
    assert set(phases[1]) == {"gb10-vllm.service", "gb10-vllm-tp.service"}
    assert phases[2:] == [["gb10-ray-worker.service"], ["gb10-ray-head.service"]]
    loops = [task["loop"] for task in _phase_tasks()]
    assert [f"_serving_retire_phases[{n}]" in loop for n, loop in enumerate(loops)] == [True] * 4


def test_switch_reads_every_unit_that_makes_a_topology_run():
    play = next(play for play in SWITCH if play.get("name", "").startswith("Switch | what every node runs"))
    switch_units = play["vars"]["__switch_units"]
    assert set(switch_units) == set(ROLE_VARS["_serving_unit_sets"])
    for role, units in switch_units.items():
        assert set(units) <= set(ROLE_VARS["_serving_unit_sets"][role]), role
        assert {s["unit"] for s in ROLE_VARS["_serving_services"][role]} <= set(units), role
