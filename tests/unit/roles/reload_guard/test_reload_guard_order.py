# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 39, item 1: no systemctl daemon-reload on a node that runs GPU containers before the /dev/char guard holds.

With Docker's systemd cgroup driver a daemon-reload detaches the GPU from every running container
(NVIDIA/nvidia-container-toolkit#48, #1227). The collection reloads systemd wherever it writes a unit, enables one
(``systemctl enable`` reloads too) or installs packages that ship units. This test reads the roles' task order: every
role that does any of that imports gb10.serving.reload_guard at the end of its preflight, its preflight is its first
step, nothing in its preflight before the guard reloads or writes, and node_preflight runs the guard's read-only
checks first of all, before any node changes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[4]
ROLES = REPO / "roles"
SYSTEMD_MODULES = {"ansible.builtin.systemd_service", "ansible.builtin.systemd"}
WRITE_MODULES = {"ansible.builtin.template", "ansible.builtin.copy"}
UNIT_SUFFIXES = (".service", ".timer", ".socket", ".conf")
# Roles that install packages shipping systemd units (their postinst reloads systemd): the NVIDIA driver set.
PACKAGE_ROLES = {"nvidia_lockstep"}
GUARD = "gb10.serving.reload_guard"


def _tasks(items):
    """Every task of a task list, blocks opened."""
    for task in items or ():
        if not isinstance(task, dict):
            continue
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))


def _load(path):
    return yaml.safe_load(path.read_text()) or []


def _reloads(task):
    """Whether a task reloads systemd: daemon_reload, enabled (systemctl enable reloads), or a unit file written."""
    for module in SYSTEMD_MODULES:
        args = task.get(module)
        if isinstance(args, dict) and (args.get("daemon_reload") or "enabled" in args):
            return True
    for module in WRITE_MODULES:
        args = task.get(module)
        if isinstance(args, dict):
            dest = str(args.get("dest", ""))
            if "/systemd/" in dest or dest.endswith(UNIT_SUFFIXES[:3]) or "unit" in str(args.get("src", "")):
                return True
    return False


def _changes(task):
    return _reloads(task) or any(
        key in ("ansible.builtin.template", "ansible.builtin.copy", "ansible.builtin.apt", "ansible.builtin.file")
        for key in task
    )


def reloading_roles():
    found = set(PACKAGE_ROLES)
    for role in sorted(p for p in ROLES.iterdir() if p.is_dir()):
        for folder in ("tasks", "handlers"):
            for path in sorted((role / folder).glob("*.yml")):
                if any(_reloads(task) for task in _tasks(_load(path))):
                    found.add(role.name)
    return sorted(found)


def _imports_guard(task):
    return (task.get("ansible.builtin.import_role") or {}).get("name") == GUARD


def test_the_reloading_roles_are_found():
    roles = reloading_roles()
    for role in ("serving", "memory_guard", "fabric_firewall", "proxy", "monitoring", "nvidia_lockstep"):
        assert role in roles
    assert "reload_guard" not in roles


@pytest.mark.parametrize("role", reloading_roles())
def test_pitfall_daemon_reload_detaches_gpu_guard_before_any_reload(role):
    main = _load(ROLES / role / "tasks" / "main.yml")
    first = main[0].get("ansible.builtin.import_tasks")
    assert (first.get("file") if isinstance(first, dict) else first) == "preflight.yml", (
        f"{role}: tasks/main.yml must start with its preflight, which makes the daemon-reload guard hold"
    )
    preflight = list(_tasks(_load(ROLES / role / "tasks" / "preflight.yml")))
    guards = [i for i, task in enumerate(preflight) if _imports_guard(task)]
    assert guards, f"{role}: tasks/preflight.yml does not import {GUARD}"
    guard = preflight[guards[0]]
    # only on nodes that run GPU containers (gb10_nodes), never skipped by anything else
    assert guard.get("when") == "inventory_hostname in groups['gb10_nodes'] | default([])"
    before = [task.get("name") for task in preflight[: guards[0]] if _changes(task)]
    assert before == [], f"{role}: changes the node before the daemon-reload guard: {before}"


def test_pitfall_daemon_reload_detaches_gpu_checked_first_by_node_preflight():
    defaults = _load(ROLES / "node_preflight" / "defaults" / "main.yml")
    assert defaults["node_preflight_roles"][0] == "reload_guard"
    checks = list(_tasks(_load(ROLES / "reload_guard" / "tasks" / "checks.yml")))
    assert not any(_changes(task) for task in checks)
    assert checks[-1]["ansible.builtin.set_fact"].keys() == {"__reload_guard_state", "__reload_guard_problems"}
    # what later steps read is set_fact'ed, never a register a skipped check (node_preflight ran it) would overwrite
    assert all(task.get("register") not in ("__reload_guard_state", "__reload_guard_problems") for task in checks)


def test_pitfall_daemon_reload_detaches_gpu_guard_role_verifies_before_it_marks_held():
    main = _load(ROLES / "reload_guard" / "tasks" / "main.yml")
    assert len(main) == 1
    assert main[0]["ansible.builtin.include_tasks"]["file"] == "guard.yml"
    assert main[0]["when"] == "not (__reload_guard_held | default(false))"
    # the included tasks run wherever the include runs (it carries the importing role's tags), as imported ones did
    assert main[0]["ansible.builtin.include_tasks"]["apply"] == {"tags": ["always"]}
    steps = [
        task["ansible.builtin.import_tasks"]["file"] for task in _load(ROLES / "reload_guard" / "tasks" / "guard.yml")
    ]
    assert steps == ["preflight.yml", "install.yml", "configure.yml", "verify.yml"]
    verify = _load(ROLES / "reload_guard" / "tasks" / "verify.yml")
    assert "ansible.builtin.assert" in verify[-2]
    assert verify[-1]["ansible.builtin.set_fact"] == {"__reload_guard_held": True}
    # the guard itself never reloads systemd
    for name in ("guard.yml", "preflight.yml", "install.yml", "configure.yml", "verify.yml", "checks.yml"):
        assert not any(_reloads(task) for task in _tasks(_load(ROLES / "reload_guard" / "tasks" / name)))


def _role_task_file_reloads(role, tasks_from):
    name = tasks_from if tasks_from.endswith(".yml") else tasks_from + ".yml"
    path = ROLES / role / "tasks" / name
    return path.exists() and any(_reloads(task) for task in _tasks(_load(path)))


def _task_lists():
    """Every playbook's plays' task lists and every role's task files, each named for the message."""
    for path in sorted((REPO / "playbooks").glob("*.yml")):
        for play in _load(path):
            if isinstance(play, dict):
                yield path.name, play.get("tasks")
    for path in sorted(ROLES.glob("*/tasks/*.yml")):
        yield str(path.relative_to(ROLES)), _load(path)


def test_pitfall_daemon_reload_detaches_gpu_guard_before_a_playbooks_own_reload():
    """A playbook or a role that runs another role's reloading task file directly (the switch's retire, in
    roles/switch_topology: systemctl disable reloads) makes the guard hold first, in the same task list."""
    checked = 0
    for name, task_list in _task_lists():
        tasks = list(_tasks(task_list))
        for index, task in enumerate(tasks):
            args = task.get("ansible.builtin.include_role") or task.get("ansible.builtin.import_role") or {}
            role = str(args.get("name", "")).rpartition(".")[2]
            if not args.get("tasks_from") or not _role_task_file_reloads(role, str(args["tasks_from"])):
                continue
            checked += 1
            guards = [
                t
                for t in tasks[:index]
                if (t.get("ansible.builtin.include_role") or t.get("ansible.builtin.import_role") or {}).get("name")
                == GUARD
            ]
            assert guards, f"{name}: {task.get('name')} reloads systemd before {GUARD} in its task list"
    assert checked >= 1  # roles/switch_topology's retire
