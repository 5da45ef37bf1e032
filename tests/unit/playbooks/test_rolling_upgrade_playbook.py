# Copyright: gb10.serving maintainers
# Apache-2.0
"""The shape of playbooks/rolling_upgrade.yml: what DESIGN section 6 promises, in the order it promises it."""

from __future__ import annotations

from pathlib import Path

import yaml

PLAYBOOKS = Path(__file__).resolve().parents[3] / "playbooks"
# The per-node step of the serial play: roles/upgrade_node, relative to PLAYBOOKS as every file here is loaded.
UPGRADE_NODE = "../roles/upgrade_node"
# The switch's steps: roles/switch_topology's entry points, one a play of playbooks/switch_topology.yml.
SWITCH_TOPOLOGY = "../roles/switch_topology"


def load(name):
    return yaml.safe_load((PLAYBOOKS / name).read_text())


def names(tasks):
    return [task["name"] for task in tasks]


def test_plans_first_then_refuses_then_proves_the_target_before_the_serial_play():
    plays = load("rolling_upgrade.yml")
    assert plays[0]["ansible.builtin.import_playbook"] == "preflight.yml"
    preflight = load("preflight.yml")
    assert preflight[0]["ansible.builtin.import_playbook"] == "plan.yml"
    # roles/gb10 first (the shared values and the plan handle), as every play lists it.
    assert preflight[1]["roles"] == [{"role": "gb10.serving.gb10"}, {"role": "gb10.serving.node_preflight"}]
    assert preflight[1]["any_errors_fatal"] is True
    refuse, prove, serial = plays[1], plays[2], plays[3]
    assert "switch_topology.yml" in refuse["tasks"][0]["ansible.builtin.assert"]["fail_msg"]
    assert prove["any_errors_fatal"] is True and "serial" not in prove
    roles = [t.get("ansible.builtin.include_role", {}).get("name") for t in prove["tasks"]]
    assert {"gb10.serving.serving_image", "gb10.serving.model_weights"} <= set(roles)
    # The lockstep set was resolved by the preflight with apt-get --simulate (roles/nvidia_lockstep/tasks/checks.yml),
    # read-only even in check mode; what it would move decides the node's driver change.
    checks = yaml.safe_load((PLAYBOOKS.parent / "roles/nvidia_lockstep/tasks/checks.yml").read_text())
    lockstep = next(t for t in checks if t["name"] == "Resolve the whole set at its pins")
    argv = lockstep["ansible.builtin.command"]["argv"]
    assert "'--simulate'" in argv and "'--allow-downgrades'" in argv, argv
    assert lockstep["check_mode"] is False and lockstep["changed_when"] is False
    assert any("__nvidia_lockstep_moves" in str(t) for t in prove["tasks"])
    assert serial["serial"] == 1 and serial["any_errors_fatal"] is True
    assert [role["role"] for role in serial["roles"]] == [
        "gb10.serving.gb10",
        "gb10.serving.upgrade_node",
    ] and "tasks" not in serial


def _rescue_drain(rescue):
    """The rescue's re-drain of the node: roles/drain's drain entry point, inside its own block."""
    keep = next(t for t in rescue if t["name"].startswith("Keep the node drained"))
    return keep, keep["block"][0]


def test_a_failed_node_is_kept_drained_and_the_message_says_how_to_resume():
    block = load(f"{UPGRADE_NODE}/tasks/main.yml")[0]
    rescue = block["rescue"]
    keep, drain = _rescue_drain(rescue)
    # Only a node its drain step took out is kept out; one that failed before it was not drained.
    assert keep["when"] == "__upgrade_node_drained | default(false) | bool"
    assert drain["ansible.builtin.include_role"] == {"name": "gb10.serving.drain", "tasks_from": "drain"}
    assert drain["vars"]["drain_servers"] == ["{{ inventory_hostname }}"]
    assert {call["state"] for call in _server_calls(load("../roles/drain/tasks/drain.yml"))} == {"drain"}
    assert "upgrade_failure_message" in rescue[-1]["ansible.builtin.fail"]["msg"]


def test_per_node_steps_in_order():
    steps = names(load(f"{UPGRADE_NODE}/tasks/apply.yml"))

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
        at("tool-call smoke test"),
        at("without a restart of its own"),
        at("Put the replica back in service"),
    ]
    assert order == sorted(order), steps
    # The serving role it applies waits for a generation, then sends the warm-up request (seed 004), as it does on
    # every path that starts a replica; the upgrade sends no second one.
    service = names(load("../roles/serving/tasks/service.yml"))
    assert (
        service.index("Warm the engine up before it gets clients")
        == service.index("Wait until the engine answers /health and generates") + 1
    )
    assert names(load("../roles/serving/tasks/warmup.yml"))[0] == "Send the warm-up request"
    assert not any("warm-up" in step for step in steps), steps


def test_reboot_passes_the_pre_reboot_gate_first():
    apply = load(f"{UPGRADE_NODE}/tasks/apply.yml")
    reboot = next(t for t in apply if t["name"] == "Reboot into the target kernel")
    inner = reboot["block"]
    assert inner[0]["ansible.builtin.include_role"]["tasks_from"] == "pre_reboot_gate"
    assert "ansible.builtin.reboot" in inner[1]
    assert inner[1]["when"] == "upgrade_node_restart == 'reboot'"
    assert inner[2]["ansible.builtin.command"]["argv"] == "{{ upgrade_node_restart_command }}"
    assert inner[2]["when"] == "upgrade_node_restart == 'command'"


def test_restart_method_defaults_to_a_reboot_and_is_checked_on_every_node_before_any_change():
    defaults = yaml.safe_load((PLAYBOOKS / UPGRADE_NODE / "defaults/main.yml").read_text())
    assert (defaults["upgrade_node_restart"], defaults["upgrade_node_restart_command"]) == ("reboot", [])
    plays = load("rolling_upgrade.yml")
    # The play that proves the target on every node (any_errors_fatal) checks it first, with the role's defaults and
    # the inventory's values, before any node stops.
    prove = next(
        p for p in plays if p.get("name") == "Rolling upgrade | prove the target on every node before any node stops"
    )
    assert prove["any_errors_fatal"] is True
    first = prove["tasks"][0]["ansible.builtin.include_role"]
    assert first == {"name": "gb10.serving.upgrade_node", "tasks_from": "preflight"}
    check = load(f"{UPGRADE_NODE}/tasks/preflight.yml")[0]
    assert check["ansible.builtin.assert"]["that"][0] == "upgrade_node_restart in ['reboot', 'command']"
    assert "Nothing was changed" in check["ansible.builtin.assert"]["fail_msg"]
    # No choices in the preflight entry point: the refusal is the role's message, naming the node and the fix.
    specs = yaml.safe_load((PLAYBOOKS / UPGRADE_NODE / "meta/argument_specs.yml").read_text())["argument_specs"]
    assert "choices" not in specs["preflight"]["options"]["upgrade_node_restart"]


def test_old_setting_names_are_refused_not_ignored():
    # Renamed from the playbook's rolling_upgrade_* (issue 41 item 3): a site's restart command set under the old
    # name would otherwise be ignored and the node rebooted.
    refuse = next(
        p for p in load("rolling_upgrade.yml") if p.get("name") == "Rolling upgrade | refuse a site that cannot roll"
    )
    task = next(t for t in refuse["tasks"] if t["name"] == "Refuse the upgrade's settings under their old names")
    renamed = task["vars"]["__rolling_upgrade_renamed"]
    assert "select('match', '^rolling_upgrade_')" in renamed and "reject('eq', 'rolling_upgrade_report')" in renamed
    assert "'^rolling_upgrade_', 'upgrade_node_'" in task["ansible.builtin.assert"]["fail_msg"]


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
        f"{UPGRADE_NODE}/tasks/main.yml",
        f"{UPGRADE_NODE}/tasks/compare.yml",
        f"{UPGRADE_NODE}/tasks/apply.yml",
        f"{SWITCH_TOPOLOGY}/tasks/drain.yml",
        f"{SWITCH_TOPOLOGY}/tasks/ready.yml",
        "ready.yml",
        "../roles/drain/tasks/drain.yml",
        "../roles/drain/tasks/ready.yml",
    ]
    changes = [(name, call) for name in files for call in _server_calls(load(name)) if "state" in call]
    assert {call["state"] for _name, call in changes} == {"drain", "ready"}
    for name, call in changes:
        assert "record_dir" in str(call.get("record_dir")) or "gb10_proxy_admin_state_dir" in str(
            call.get("record_dir")
        ), (
            name,
            call,
        )
    # The rescue drains again through roles/drain (recorded, above), with the step that failed as the reason.
    rescue = load(f"{UPGRADE_NODE}/tasks/main.yml")[0]["rescue"]
    remember, (_keep, drain) = rescue[0], _rescue_drain(rescue)
    assert "ansible_failed_task" in remember["ansible.builtin.set_fact"]["__upgrade_node_failed_step"]
    assert "__upgrade_node_failed_step" in drain["vars"]["drain_reason"]


def _tasks(tasks):
    """Every task of a task list, in order, the tasks of its blocks in their place."""
    for task in tasks:
        if "block" in task:
            yield from _tasks(task["block"])
        else:
            yield task


def _drain_entry_points(name):
    return [
        t["ansible.builtin.include_role"]["tasks_from"]
        for t in _tasks(load(name))
        if t.get("ansible.builtin.include_role", {}).get("name") == "gb10.serving.drain"
    ]


def test_upgrade_and_switch_drain_judge_idle_and_ready_through_one_role():
    # Issue 15: the switch treated an engine that did not answer its /metrics as idle, the upgrade did not; both
    # now go through roles/drain, where a running engine that does not answer is not idle.
    assert _drain_entry_points(f"{UPGRADE_NODE}/tasks/apply.yml") == ["drain", "idle", "ready"]
    assert _drain_entry_points(f"{SWITCH_TOPOLOGY}/tasks/drain.yml") == ["drain", "idle"]
    assert _drain_entry_points(f"{SWITCH_TOPOLOGY}/tasks/ready.yml") == ["ready"]
    idle = load("../roles/drain/tasks/idle.yml")
    assert (
        "vllm_in_flight" in idle[0]["until"]
        and idle[0]["loop"] == "{{ drain_endpoints | selectattr('running') | list }}"
    )
    assert "a running engine that does not answer is not" in idle[1]["vars"]["__drain_busy"]


def test_the_serial_play_hands_the_role_only_what_the_plays_derive_and_the_inventory_sets_the_rest():
    # Issue 41 item 3: the upgrade's settings are roles/upgrade_node's defaults. Play vars outrank the inventory, and
    # a value passed to the role as a role parameter outranks it too: the play sets neither, so a group_vars or
    # host_vars file overrides any timeout. What the role requires is only what the plays before it derive.
    specs = yaml.safe_load((PLAYBOOKS / UPGRADE_NODE / "meta/argument_specs.yml").read_text())["argument_specs"]
    options = specs["main"]["options"]
    required = {name for name, spec in options.items() if spec.get("required")}
    assert required == {"upgrade_node_driver_change", "upgrade_node_resume_command"}
    per_node = next(p for p in load("rolling_upgrade.yml") if p.get("name") == "Rolling upgrade | one node at a time")
    assert "vars" not in per_node
    # roles/gb10 first (the shared values and the plan handle), then the role that upgrades the node.
    assert per_node["roles"][0] == {"role": "gb10.serving.gb10"}
    assert {key for key in per_node["roles"][1] if key != "role"} == required
    defaults = yaml.safe_load((PLAYBOOKS / UPGRADE_NODE / "defaults/main.yml").read_text())
    for setting, value in {
        "drain_timeout_s": 300,
        "poll_s": 1,
        "health_timeout_s": 900,
        "request_timeout_s": 300,
        "ready_timeout_s": 60,
        "smoke_max_tokens": 256,
        "reboot_timeout_s": 1800,
        "toolcall_threshold": 0.8,
        "toolcall_margin": 0.05,
    }.items():
        assert defaults[f"upgrade_node_{setting}"] == value, setting
        assert options[f"upgrade_node_{setting}"]["default"] == value, setting
    # The report shows each upgraded node's settings as the role resolved them (the inventory's, else the defaults).
    record = next(t for t in load(f"{UPGRADE_NODE}/tasks/apply.yml") if t["name"] == "Record the node's figures")
    result = record["ansible.builtin.set_fact"]["__upgrade_node_result"]
    assert "'settings'" in result and "'drain_timeout_s': upgrade_node_drain_timeout_s | int" in result
    # No | default(<literal>) of a setting left in the playbook.
    text = (PLAYBOOKS / "rolling_upgrade.yml").read_text()
    assert "default('reboot')" not in text and "default(0.8)" not in text and "toolcall_eval" not in text


ROLES = PLAYBOOKS.parent / "roles"


def test_pitfall_disk_fills_free_space_is_checked_on_every_node_before_any_change_and_again_before_the_fetch():
    # Before any node changes: preflight.yml runs node_preflight on every node (any_errors_fatal), which runs
    # model_weights' checks (the disk among them) for the target revision the plan just resolved.
    preflight = load("preflight.yml")
    assert preflight[1]["hosts"] == "gb10_nodes" and preflight[1]["any_errors_fatal"] is True
    defaults = yaml.safe_load((ROLES / "node_preflight/defaults/main.yml").read_text())
    assert "model_weights" in defaults["node_preflight_roles"]
    checks = (ROLES / "model_weights/tasks/checks.yml").read_text()
    assert "gb10.serving.weights_disk_problems(inventory_hostname" in checks
    # The role's own preflight asserts those problems before it fetches (reusing node_preflight's results).
    preflight_tasks = yaml.safe_load((ROLES / "model_weights/tasks/preflight.yml").read_text())
    assert preflight_tasks[1]["ansible.builtin.assert"]["that"] == "__model_weights_problems | length == 0"
    # The rolling upgrade's preflight is its first play; the fetch is in the play that proves the target, before the
    # serial play stops any node.
    plays = load("rolling_upgrade.yml")
    assert plays[0]["ansible.builtin.import_playbook"] == "preflight.yml"
    assert "gb10.serving.model_weights" in [
        t.get("ansible.builtin.include_role", {}).get("name") for t in plays[2]["tasks"]
    ]
    # Right before writing, the fetch and the receiver measure the disk again in their container (the image pulled
    # or built since may have taken the room): every container the role starts gets the reserve.
    role_vars = yaml.safe_load((ROLES / "model_weights/vars/main.yml").read_text())
    assert "--reserve-gib={{ model_weights_disk_reserve_gib }}" in role_vars["_model_weights_container_args"]
    fetch = (ROLES / "model_weights/tasks/transfer.yml").read_text()
    assert fetch.count("_model_weights_container_args") == 3  # fetch, serve, receive


def _prune_tasks(play):
    return [
        t
        for t in play.get("tasks", [])
        for call in (t.get("ansible.builtin.include_role") or t.get("ansible.builtin.import_role") or {},)
        if call.get("name") == "gb10.serving.model_weights" and call.get("tasks_from") == "prune"
    ]


def test_pitfall_superseded_revisions_fill_the_disk_pruned_only_after_every_node_serves_the_target():
    plays = load("rolling_upgrade.yml")
    serial = next(i for i, p in enumerate(plays) if p.get("serial") == 1)
    pruning = [i for i, p in enumerate(plays) if _prune_tasks(p)]
    # Once, after the serial play (which stops the run at the first failed node), never inside it.
    assert len(pruning) == 1 and pruning[0] > serial, pruning
    assert not _prune_tasks(plays[serial]) and "prune" not in (ROLES / "upgrade_node/tasks/apply.yml").read_text()
    assert plays[serial]["any_errors_fatal"] is True
    play = plays[pruning[0]]
    assert play["hosts"] == "gb10_nodes"
    (task,) = _prune_tasks(play)
    # Not where a node of the site took no part in the run (--limit): it may still serve the old revision.
    assert task["when"] == "groups['gb10_nodes'] | difference(ansible_play_hosts) | length == 0"
    assert task["ansible.builtin.include_role"]["apply"]["tags"] == ["model_weights", "model_weights_prune"]


def test_site_prunes_after_the_serving_units_are_up():
    plays = yaml.safe_load((PLAYBOOKS.parent / "site.yml").read_text())
    units = next(i for i, p in enumerate(plays) if p.get("name") == "Serving units")
    pruning = [i for i, p in enumerate(plays) if _prune_tasks(p)]
    assert len(pruning) == 1 and pruning[0] > units and pruning[0] == len(plays) - 1
    (task,) = _prune_tasks(plays[pruning[0]])
    assert task["tags"] == ["model_weights", "model_weights_prune"]


def test_the_simulation_keeps_both_revisions_so_the_served_site_suite_never_refetches():
    # tests/integration/serving upgrades back and forth between the hub's two revisions.
    sim = yaml.safe_load((PLAYBOOKS.parent / "inventories/sim/group_vars/all/sim.yml").read_text())
    assert sim["model_weights_keep_revisions"] == 2
    role = yaml.safe_load((ROLES / "model_weights/defaults/main.yml").read_text())
    assert role["model_weights_keep_revisions"] == 1
