# Copyright: gb10.serving maintainers
# Apache-2.0
"""The shape of playbooks/drain.yml (issue 40 item 1): decide from every proxy before any change, drain recorded,
idle judged by roles/drain, units stopped in the plan's order, and the upgrade's answer check wired before its
ready (roles/upgrade_node)."""

from __future__ import annotations

from test_rolling_upgrade_playbook import UPGRADE_NODE, _server_calls, load, names


def test_pitfall_restart_forgets_a_drained_replica_the_maintenance_drain_is_recorded():
    # Issue 19: a drain only through the runtime API was gone after an HAProxy restart; this one is recorded too.
    _plan, decide, _wait = load("drain.yml")
    drains = [call for call in _server_calls(decide) if call.get("state") == "drain"]
    assert len(drains) == 1 and "gb10_proxy_admin_state_dir" in drains[0]["record_dir"], drains
    assert "maintenance (playbooks/drain.yml" in drains[0]["reason"]


def test_every_proxy_is_read_and_the_decision_made_before_the_drain():
    plan, decide, _wait = load("drain.yml")
    assert plan["ansible.builtin.import_playbook"] == "plan.yml"
    assert decide["hosts"] == "gb10_proxy" and decide["any_errors_fatal"] is True
    steps = names(decide["tasks"])
    assert (
        steps.index("Read this proxy's servers and the ones it holds")
        < steps.index("Decide whether the servers may be drained")
        < steps.index("Refuse a drain that names an unknown server or leaves no replica serving")
    )
    assert steps[-1].startswith("Drain the servers in this proxy")
    decided = decide["tasks"][1]["ansible.builtin.set_fact"]["__drain_decision"]
    assert "gb10.serving.drain_verdict" in decided and "drain_force" in decided
    # The drain loops the decided names, never -e drain_servers itself (a string: its characters).
    assert decide["tasks"][-1]["loop"] == "{{ __drain_decision.names }}"


def test_idle_is_roles_drain_judgement_and_the_stop_follows_the_plans_unit_order():
    wait = load("drain.yml")[2]
    idle = next(t for t in wait["tasks"] if "ansible.builtin.include_role" in t)
    assert idle["ansible.builtin.include_role"] == {"name": "gb10.serving.drain", "tasks_from": "idle"}
    stop = next(t for t in wait["tasks"] if t["name"].startswith("Stop the node's serving units"))
    assert stop["loop"] == "{{ __drain_node.unit_names | default([]) }}"
    assert stop["ansible.builtin.systemd_service"]["state"] == "stopped" and stop["when"] == "drain_stop | bool"
    steps = names(wait["tasks"])
    assert steps.index(idle["name"]) < steps.index(stop["name"])


def test_the_answer_check_runs_after_the_gate_and_before_the_ready():
    steps = names(load(f"{UPGRADE_NODE}/tasks/apply.yml"))
    check = "Apply the answer check (greedy prompts compared with a replica still serving)"
    assert steps.index("Apply the tool-calling gate") < steps.index(check)
    assert steps.index(check) < steps.index(
        "Put the replica back in service in every proxy (ready), and wait until every proxy holds it up"
    )
