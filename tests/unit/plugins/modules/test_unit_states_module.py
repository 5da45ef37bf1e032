# Copyright: gb10.serving maintainers
# Apache-2.0
"""The unit_states module: two systemctl calls (answered with real outputs of a simulated node), the facts it
returns, and a systemctl that fails."""

from __future__ import annotations

import importlib
from pathlib import Path
from unittest import mock

from ansible.module_utils import basic
from module_harness import run_main

unit_states = importlib.import_module("ansible_collections.gb10.serving.plugins.modules.unit_states")
FIXTURES = Path(__file__).resolve().parents[1] / "module_utils" / "fixtures"
OUTPUTS = {
    "list-units": (FIXTURES / "systemctl_list-units_all_plain_sim-node_252.txt").read_text(),
    "list-unit-files": (FIXTURES / "systemctl_list-unit-files_sim-node_252.txt").read_text(),
    "show": (FIXTURES / "systemctl_show_id_invocation_sim-node_252.txt").read_text(),
}


def _run(answer, **args):
    calls = []

    def run_command(self, cmd, **_kwargs):
        calls.append(cmd)
        return answer(cmd)

    with mock.patch.object(basic.AnsibleModule, "get_bin_path", lambda self, name, **_kw: f"/usr/bin/{name}"):
        return run_main(unit_states.main, args, run_command), calls


def test_reads_every_unit_in_two_systemctl_calls_and_changes_nothing():
    result, calls = _run(lambda cmd: (0, OUTPUTS[cmd[1]], ""))
    assert [cmd[:2] for cmd in calls] == [
        ["/usr/bin/systemctl", "list-units"],
        ["/usr/bin/systemctl", "list-unit-files"],
    ]
    assert result["changed"] is False
    facts = result["ansible_facts"]
    assert facts["gb10_units"]["haproxy.service"]["file_state"] == "enabled"
    assert "earlyoom.service" in facts["gb10_units_up"]
    assert "gb10-warm-agent-replica.service" not in facts["gb10_units_up"]


def test_a_failing_systemctl_fails_the_read_with_its_words():
    result, _calls = _run(lambda cmd: (1, "", "System has not been booted with systemd as init system (PID 1)."))
    assert result["failed"]
    assert "systemctl list-units --all --plain --no-legend --no-pager --full exited 1" in result["msg"]
    assert "not been booted with systemd" in result["msg"]


def test_the_engines_current_run_read_in_a_third_call_where_asked():
    result, calls = _run(lambda cmd: (0, OUTPUTS[cmd[1]], ""), invocations=["gb10-vllm.service"])
    assert calls[0] == [
        "/usr/bin/systemctl",
        "show",
        "--no-pager",
        "--property=Id,InvocationID",
        "--",
        "gb10-vllm.service",
    ]
    assert len(calls) == 3
    units = result["ansible_facts"]["gb10_units"]
    assert units["gb10-vllm.service"]["invocation"] == "0aaa7bc87d5848439aef6f1a8c987239"
