# Copyright: gb10.serving maintainers
# Apache-2.0
"""flashinfer_jit_wait: one report a round from the build log, `docker inspect` answered by the test (issue 17)."""

from __future__ import annotations

import importlib
import os
import time
from unittest import mock

from module_harness import run_main

wait = importlib.import_module("ansible_collections.gb10.serving.plugins.modules.flashinfer_jit_wait")
basic = importlib.import_module("ansible.module_utils.basic")


def run(tmp_path, running, log_lines, age_s, started_ago=312, **extra):
    log = tmp_path / "gb10-prebuild.log"
    log.write_text("".join(f"{line}\n" for line in log_lines))
    moved = time.time() - age_s
    os.utime(log, (moved, moved))
    answers = list(running)

    def run_command(self, cmd, **_kwargs):
        assert cmd[1:4] == ["inspect", "-f", "{{.State.Running}}"], cmd
        state = answers.pop(0) if len(answers) > 1 else answers[0]
        return (0, "true\n", "") if state else (1, "", "Error: No such object")

    args = {
        "container": "gb10-flashinfer-jit",
        "log": str(log),
        "started": int(time.time() - started_ago),
        "wait": 1,
        "timeout": 5400,
        **extra,
    }
    with (
        mock.patch.object(wait, "POLL_S", 0.05),
        mock.patch.object(basic.AnsibleModule, "get_bin_path", lambda self, name, required=False: "/usr/bin/docker"),
    ):
        return run_main(wait.main, args, run_command)


def test_running_build_reports_ninja_progress_with_the_last_build_as_estimate(tmp_path):
    result = run(tmp_path, [True], ["[1/97] nvcc a", "[37/97] nvcc c"], 20, last_build={"build_seconds": 800})
    assert result["running"] and not result["stalled"] and not result["timed_out"]
    assert (result["k"], result["n"]) == (37, 97)
    assert result["message"].startswith("[37/97] 5m1")
    assert "left (last build 13m20s)" in result["message"]


def test_finished_build_returns_at_once(tmp_path):
    result = run(tmp_path, [False], ["[97/97] link"], 1)
    assert not result["running"] and not result["stalled"]
    assert result["message"].startswith("finished after ")


def test_pitfall_build_without_progress_for_the_stall_limit_is_stalled(tmp_path):
    result = run(tmp_path, [True], ["[10/97] nvcc j"], 2000, started_ago=4000, last_build={"worst_unit_seconds": 100})
    assert result["stalled"] and result["stall_s"] == 1800
    assert "STALLED: no step finished for 33m" in result["message"]
