# Copyright: gb10.serving maintainers
# Apache-2.0
"""The oom_protection module: each protected unit's main process from systemctl, its score and PID 1's capability
bounding set from /proc (both answered by the test), judged as roles/memory_guard requires, in one module run."""

from __future__ import annotations

import importlib
from unittest import mock

from ansible.module_utils import basic
from module_harness import run_main

oom_protection = importlib.import_module("ansible_collections.gb10.serving.plugins.modules.oom_protection")
CAPBND_ALL = "Name:\tsystemd\nCapBnd:\t000001ffffffffff\n"
CAPBND_NO_SYS_RESOURCE = f"Name:\tsystemd\nCapBnd:\t{0x1FFFFFFFFFF & ~(1 << 24):016x}\n"


def _run(main_pids, proc, **args):
    calls = []

    def run_command(self, cmd, **_kwargs):
        calls.append(cmd)
        return (0, f"{main_pids[cmd[-1]]}\n", "")

    with (
        mock.patch.object(basic.AnsibleModule, "get_bin_path", lambda self, name, **_kw: f"/usr/bin/{name}"),
        mock.patch.object(oom_protection, "_text", lambda path: proc.get(path, "")),
    ):
        result = run_main(oom_protection.main, {"node": "spark-1", **args}, run_command)
    return result, calls


def test_pitfall_starved_node_lost_sshd_score_applied_read_from_the_kernel():
    """Seed 004: sshd's main process at -1000 as the kernel shows it, read in one module run with PID 1's status."""
    proc = {"/proc/1/status": CAPBND_ALL, "/proc/812/oom_score_adj": "-1000\n"}
    result, calls = _run({"ssh.service": 812}, proc, units=["ssh.service"])
    assert calls == [["/usr/bin/systemctl", "show", "--property=MainPID", "--value", "ssh.service"]]
    assert result["changed"] is False
    (verdict,) = result["verdicts"]
    assert (verdict["unit"], verdict["main_pid"], verdict["applied"], verdict["ok"], verdict["score"]) == (
        "ssh.service",
        812,
        True,
        True,
        -1000,
    )


def test_an_unprivileged_node_refuses_the_score_and_says_why_accepted_only_where_not_required():
    proc = {"/proc/1/status": CAPBND_NO_SYS_RESOURCE, "/proc/812/oom_score_adj": "0\n"}
    required, _calls = _run({"ssh.service": 812}, proc, units=["ssh.service"])
    (verdict,) = required["verdicts"]
    assert (verdict["applied"], verdict["ok"], verdict["score"]) == (False, False, 0)
    assert "lacks CAP_SYS_RESOURCE" in verdict["msg"] and "Fix:" in verdict["msg"]
    accepted, _calls = _run({"ssh.service": 812}, proc, units=["ssh.service"], required=False)
    (verdict,) = accepted["verdicts"]
    assert (verdict["applied"], verdict["ok"]) == (False, True)
    assert "accepted: memory_guard_oom_protect_required is false on spark-1" in verdict["msg"]


def test_a_unit_without_a_main_process_is_not_applied_and_each_unit_is_judged_in_order():
    proc = {"/proc/1/status": CAPBND_ALL, "/proc/900/oom_score_adj": "-1000\n"}
    result, calls = _run({"ssh.service": 0, "docker.service": 900}, proc, units=["ssh.service", "docker.service"])
    assert [cmd[-1] for cmd in calls] == ["ssh.service", "docker.service"]
    first, second = result["verdicts"]
    assert (first["unit"], first["main_pid"], first["applied"], first["score"]) == ("ssh.service", 0, False, None)
    assert "has no main process to read" in first["msg"]
    assert (second["unit"], second["applied"]) == ("docker.service", True)


def test_a_failing_systemctl_fails_with_the_node_and_its_words():
    def run_command(self, cmd, **_kwargs):
        return (1, "", "Failed to connect to bus")

    with (
        mock.patch.object(basic.AnsibleModule, "get_bin_path", lambda self, name, **_kw: f"/usr/bin/{name}"),
        mock.patch.object(oom_protection, "_text", lambda path: ""),
    ):
        result = run_main(oom_protection.main, {"node": "spark-2", "units": ["ssh.service"]}, run_command)
    assert result["failed"] and result["msg"].startswith("spark-2: systemctl show ssh.service failed (rc=1)")
    assert "Failed to connect to bus" in result["msg"]
