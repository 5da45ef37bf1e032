# Copyright: gb10.serving maintainers
# Apache-2.0
"""The role's progress loop (roles/model_weights/tasks/progress.yml) run by ansible-playbook on localhost.

Issue 18: the loop included itself once a round and died with RecursionError at round ~246 (about an hour at the
15 s default) of a 4 hour timeout. The same tasks file, at a 1 ms interval, must run its full timeout of 1000
rounds and stop there with the timeout's message; a finished job ends it at once; a failed or silent job fails it
with the node and the cause.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml
from task_file_runner import run_task_file

REPO = Path(__file__).resolve().parents[4]
PROGRESS = REPO / "roles" / "model_weights" / "tasks" / "progress.yml"
ROLE_VARS = yaml.safe_load((REPO / "roles" / "model_weights" / "vars" / "main.yml").read_text())


def run_progress(tmp_path, status, interval="0.001", timeout="1", stale="600"):
    (tmp_path / "status-fetch.json").write_text(json.dumps(status))
    variables = {
        "model_weights_state_dir": str(tmp_path),
        "model_weights_progress_interval_s": float(interval),
        "model_weights_timeout_s": float(timeout),
        "model_weights_progress_stale_s": float(stale),
        "model_weights_repo_id": "org/m",
        "model_weights_revision": "a" * 40,
        "_model_weights_rounds": ROLE_VARS["_model_weights_rounds"],
        "_model_weights_phase": "fetch",
        "_model_weights_container": "gb10-weights-fetch",
    }
    # The result shape the assertions read, whatever ansible.cfg make exports (callback_result_format = yaml).
    env = {"ANSIBLE_CALLBACK_RESULT_FORMAT": "json"}
    started = time.monotonic()
    rc, out = run_task_file(tmp_path, PROGRESS, variables, name="The role's loop", env=env, timeout=600)
    return rc, out, time.monotonic() - started


def test_pitfall_self_including_progress_loop_runs_its_full_timeout_of_1000_rounds(tmp_path):
    status = {"bytes_done": 1 << 20, "bytes_total": 4 << 20, "finished": False, "error": None, "time": time.time()}
    rc, out, took = run_progress(tmp_path, status)
    assert rc == 2, out[-3000:]
    assert "RecursionError" not in out and "maximum recursion" not in out
    assert "(item=localhost fetch: 1.0 MiB of 4.0 MiB (25.0%), round 1000 of 1000)" in out
    assert "round 1001" not in out
    assert "localhost: the fetch still runs after 1000 rounds of 0.001 s (model_weights_timeout_s 1.0)" in out
    print(f"1000 rounds in {took:.1f} s")


def test_a_finished_job_ends_the_loop_at_once(tmp_path):
    status = {"bytes_done": 8, "bytes_total": 8, "finished": True, "error": None, "time": time.time()}
    rc, out, _took = run_progress(tmp_path, status, timeout="10")
    assert rc == 0, out[-3000:]
    assert "round 2 of" not in out
    assert "ok: [localhost] => (item=localhost fetch: 0.0 MiB of 0.0 MiB (100.0%), done)" in out


def test_a_failed_job_fails_the_loop_with_its_error(tmp_path):
    status = {"bytes_done": 8, "bytes_total": 9, "finished": True, "error": "x: 5 attempts failed", "time": time.time()}
    rc, out, _took = run_progress(tmp_path, status, timeout="10")
    assert rc == 2
    assert "localhost: the fetch failed: x: 5 attempts failed." in out
    # The task's own message is the cause (what a rescue reads as ansible_failed_result.msg).
    assert "failed: [localhost] (item=" not in out
    assert 'fatal: [localhost]: FAILED! => {"changed": false, "msg": "localhost: the fetch failed: x: 5' in out


def test_a_silent_job_fails_the_loop_naming_the_container(tmp_path):
    status = {"bytes_done": 8, "bytes_total": 9, "finished": False, "error": None, "time": time.time() - 300}
    rc, out, _took = run_progress(tmp_path, status, timeout="10", stale="60")
    assert rc == 2
    assert "the fetch stopped reporting" in out and "docker logs gb10-weights-fetch" in out


def test_each_round_prints_the_nodes_bytes_rate_and_eta(tmp_path):
    # Issue 20: bytes, rate and ETA per node in the Ansible output, from the fields weights_transfer.py writes
    # (started, bytes_at_start: a resumed transfer's rate counts only what this run moved).
    now = time.time()
    status = {"bytes_done": 30 << 20, "bytes_total": 100 << 20, "finished": False, "error": None, "time": now}
    status.update(started=now - 10, bytes_at_start=10 << 20)
    rc, out, _took = run_progress(tmp_path, status, timeout="0.003")
    assert rc == 2, out[-3000:]
    for round_no in (1, 2, 3):
        line = f"(item=localhost fetch: 30.0 MiB of 100.0 MiB (30.0%), 2.0 MiB/s, ETA 35 s, round {round_no} of 3)"
        assert line in out, out[-3000:]
