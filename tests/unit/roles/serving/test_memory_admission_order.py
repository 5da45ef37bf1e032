# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 39, item 2: the engine's start is admitted by the node's MemAvailable before anything starts it.

The handlers flushed in service.yml start (restart) every changed unit, a unit that was not running included; the
admission must come before that flush, after the other topology is retired (its memory freed)."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[4]
SERVICE = REPO / "roles" / "serving" / "tasks" / "service.yml"
DEFAULTS = REPO / "roles" / "serving" / "defaults" / "main.yml"


def _index(tasks, predicate):
    return next(i for i, task in enumerate(tasks) if predicate(task))


def test_pitfall_memory_admitted_by_free_not_available_before_any_start():
    tasks = yaml.safe_load(SERVICE.read_text())
    retire = _index(tasks, lambda t: (t.get("ansible.builtin.import_tasks") or {}).get("file") == "retire.yml")
    admit = _index(tasks, lambda t: "gb10.serving.engine_memory_admission" in t)
    flush = _index(tasks, lambda t: t.get("ansible.builtin.meta") == "flush_handlers")
    start = _index(tasks, lambda t: (t.get("ansible.builtin.systemd_service") or {}).get("state") == "started")
    assert retire < admit < flush < start
    args = tasks[admit]["gb10.serving.engine_memory_admission"]
    # the plan's table, never a figure of the role's own
    assert args["table"] == "{{ _serving_node.memory }}"
    assert "serving_memory_admission | bool" in tasks[admit]["when"]


def test_pitfall_memory_admitted_by_free_not_available_drop_is_opt_in():
    defaults = yaml.safe_load(DEFAULTS.read_text())
    assert defaults["serving_memory_admission"] is True
    assert defaults["serving_drop_caches"] is False


def test_pitfall_fabric_far_below_rated_speed_measured_before_units_are_written():
    main = yaml.safe_load((REPO / "roles" / "serving" / "tasks" / "main.yml").read_text())
    names = [
        (task.get("ansible.builtin.import_tasks") or task.get("ansible.builtin.include_tasks") or {}).get("file")
        for task in main
    ]
    assert names.index("install.yml") < names.index("fabric.yml") < names.index("configure.yml")
    fabric = yaml.safe_load((REPO / "roles" / "serving" / "tasks" / "fabric.yml").read_text())
    # the packages read once a run (roles/gb10 tasks_from packages), then iperf3 installed where it is missing
    assert fabric[0]["ansible.builtin.include_role"] == {"name": "gb10.serving.gb10", "tasks_from": "packages"}
    assert fabric[1]["ansible.builtin.apt"]["name"] == "iperf3"
