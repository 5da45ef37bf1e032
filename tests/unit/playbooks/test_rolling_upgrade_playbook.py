# Copyright: gb10.serving maintainers
# Apache-2.0
"""The shape of playbooks/rolling_upgrade.yml: what DESIGN section 6 promises, in the order it promises it."""

from __future__ import annotations

from pathlib import Path

import yaml

PLAYBOOKS = Path(__file__).resolve().parents[3] / "playbooks"


def load(name):
    return yaml.safe_load((PLAYBOOKS / name).read_text())


def names(tasks):
    return [task["name"] for task in tasks]


def test_plans_first_then_refuses_then_proves_the_target_before_the_serial_play():
    plays = load("rolling_upgrade.yml")
    assert plays[0]["ansible.builtin.import_playbook"] == "preflight.yml"
    preflight = load("preflight.yml")
    assert preflight[0]["ansible.builtin.import_playbook"] == "plan.yml"
    assert preflight[1]["roles"] == [{"role": "gb10.serving.node_preflight"}]
    assert preflight[1]["any_errors_fatal"] is True
    refuse, prove, serial = plays[1], plays[2], plays[3]
    assert "switch_topology.yml" in refuse["tasks"][0]["ansible.builtin.assert"]["fail_msg"]
    assert prove["any_errors_fatal"] is True and "serial" not in prove
    roles = [t.get("ansible.builtin.include_role", {}).get("name") for t in prove["tasks"]]
    assert {"gb10.serving.serving_image", "gb10.serving.model_weights"} <= set(roles)
    # The lockstep set was resolved at its pins in check mode by the preflight (roles/nvidia_lockstep/tasks/checks.yml).
    checks = yaml.safe_load((PLAYBOOKS.parent / "roles/nvidia_lockstep/tasks/checks.yml").read_text())
    lockstep = next(t for t in checks if "name" in t.get("ansible.builtin.apt", {}))
    assert lockstep["check_mode"] is True and lockstep["register"] == "__nvidia_lockstep_installable"
    assert any("__nvidia_lockstep_installable is changed" in str(t) for t in prove["tasks"])
    assert serial["serial"] == 1 and serial["any_errors_fatal"] is True


def test_a_failed_node_is_kept_drained_and_the_message_says_how_to_resume():
    serial = load("rolling_upgrade.yml")[3]
    block = serial["tasks"][0]
    rescue = block["rescue"]
    assert rescue[0]["gb10.serving.haproxy_server"]["state"] == "drain"
    assert "upgrade_failure_message" in rescue[-1]["ansible.builtin.fail"]["msg"]


def test_per_node_steps_in_order():
    steps = names(load("tasks/rolling_upgrade_apply.yml"))

    def at(words):
        return next(i for i, name in enumerate(steps) if words in name)

    order = [
        at("Refuse to drain the last replica"),
        at("Drain the replica"),
        at("own /metrics"),
        at("Stop the replica"),
        at("FlashInfer JIT"),
        at("driver and kernel set"),
        at("Reboot"),
        at("Apply the serving units"),
        at("warm-up request"),
        at("tool-call smoke test"),
        at("without a restart of its own"),
        at("Put the replica back in service"),
    ]
    assert order == sorted(order), steps


def test_reboot_passes_the_pre_reboot_gate_first():
    apply = load("tasks/rolling_upgrade_apply.yml")
    reboot = next(t for t in apply if t["name"] == "Reboot into the target kernel")
    inner = reboot["block"]
    assert inner[0]["ansible.builtin.include_role"]["tasks_from"] == "pre_reboot_gate"
    assert "ansible.builtin.reboot" in inner[1]
    assert inner[1]["when"] == "__rolling_upgrade_restart == 'reboot'"
    assert inner[2]["ansible.builtin.command"]["argv"] == "{{ __rolling_upgrade_restart_command }}"
    assert inner[2]["when"] == "__rolling_upgrade_restart == 'command'"


def test_restart_method_defaults_to_a_reboot_and_is_checked_before_any_change():
    plays = load("rolling_upgrade.yml")
    per_node = next(p for p in plays if p.get("name") == "Rolling upgrade | one node at a time")
    assert per_node["vars"]["__rolling_upgrade_restart"] == "{{ rolling_upgrade_restart | default('reboot') }}"
    refuse = next(p for p in plays if p.get("name") == "Rolling upgrade | refuse a site that cannot roll")
    assert any("restart each node" in t["name"] for t in refuse["tasks"])


def _server_calls(node):
    """Every gb10.serving.haproxy_server call in a loaded playbook or task file, blocks and rescues included."""
    if isinstance(node, dict):
        if "gb10.serving.haproxy_server" in node:
            yield node["gb10.serving.haproxy_server"]
        for value in node.values():
            yield from _server_calls(value)
    elif isinstance(node, list):
        for value in node:
            yield from _server_calls(value)


def test_pitfall_restart_forgets_a_drained_replica_every_drain_and_ready_is_recorded():
    # Issue 19: a drain set only through the runtime API was gone after an HAProxy restart or reboot. Every drain
    # and ready of the upgrade, the switch and the explicit ready goes through the proxy's records (record_dir).
    files = [
        "rolling_upgrade.yml",
        "tasks/rolling_upgrade_apply.yml",
        "tasks/switch_drain.yml",
        "tasks/switch_ready.yml",
        "ready.yml",
        "../roles/drain/tasks/drain.yml",
        "../roles/drain/tasks/ready.yml",
    ]
    changes = [(name, call) for name in files for call in _server_calls(load(name)) if "state" in call]
    assert {call["state"] for _name, call in changes} == {"drain", "ready"}
    for name, call in changes:
        assert "record_dir" in str(call.get("record_dir")) or "proxy_admin_state_dir" in str(call.get("record_dir")), (
            name,
            call,
        )
    rescue = load("rolling_upgrade.yml")[3]["tasks"][0]["rescue"][0]["gb10.serving.haproxy_server"]
    assert rescue["record_dir"] == "{{ __rolling_upgrade_record_dir }}" and "ansible_failed_task" in rescue["reason"]


def _drain_entry_points(name):
    return [
        t["ansible.builtin.include_role"]["tasks_from"]
        for t in load(name)
        if t.get("ansible.builtin.include_role", {}).get("name") == "gb10.serving.drain"
    ]


def test_upgrade_and_switch_drain_judge_idle_and_ready_through_one_role():
    # Issue 15: the switch treated an engine that did not answer its /metrics as idle, the upgrade did not; both
    # now go through roles/drain, where a running engine that does not answer is not idle.
    assert _drain_entry_points("tasks/rolling_upgrade_apply.yml") == ["drain", "idle", "ready"]
    assert _drain_entry_points("tasks/switch_drain.yml") == ["drain", "idle"]
    assert _drain_entry_points("tasks/switch_ready.yml") == ["ready"]
    idle = load("../roles/drain/tasks/idle.yml")
    assert (
        "vllm_in_flight" in idle[0]["until"]
        and idle[0]["loop"] == "{{ drain_endpoints | selectattr('running') | list }}"
    )
    assert "a running engine that does not answer is not" in idle[1]["vars"]["__drain_busy"]
