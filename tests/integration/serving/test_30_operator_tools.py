# Copyright: gb10.serving maintainers
# Apache-2.0
"""The operator tools against the live site (issue 7): status prints both nodes, the sweep prints its table and
writes its report, and the tool-calling gate passes the served model. All three only read or send requests, so they
run on the site as converged (`converged_site`: make test's is the real vLLM engine, its parser and its tool calls)."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.converged_site


def _task_result(runner, task, outcome="runner_on_ok"):
    """The result of the task named ``task`` (ansible-runner's events)."""
    for event in runner.events:
        data = event.get("event_data", {})
        if event.get("event") == outcome and data.get("task") == task:
            return data["res"]
    raise AssertionError(f"no result for task {task!r}")


def _debug_msg(runner, task):
    return _task_result(runner, task)["msg"]


def test_status_prints_both_nodes_and_the_total(served_sim):
    runner = served_sim.playbook("playbooks/status.yml", {"status_window": 5})
    lines = _debug_msg(runner, "Show the status")
    print("\n" + "\n".join(lines))
    assert lines[0].startswith("topology replicas  model tiny-moe  image registry:5000/")
    for node in ("spark-1", "spark-2"):
        row = next(line for line in lines if line.startswith(f"{node}: "))
        assert "health ok" in row, row
        assert "proxy UP" in row, row
    assert lines[-1].startswith("total: 2/2 healthy, 2 UP in the proxy"), lines[-1]


def test_sweep_prints_its_table_and_writes_the_report(served_sim, tmp_path):
    runner = served_sim.playbook(
        "playbooks/bench.yml",
        {
            "bench_concurrency": [1, 2, 4],
            "bench_prompts": {"short": 32, "long": 512},
            "bench_requests_per_worker": 1,
            "bench_max_tokens": 16,
            "bench_report_dir": str(tmp_path),
        },
    )
    lines = _debug_msg(runner, "Show the table and the recommendation")
    print("\n" + "\n".join(lines))
    report = json.loads((tmp_path / "bench.json").read_text())
    assert (tmp_path / "bench.md").read_text().strip()
    assert (tmp_path / "bench.png").stat().st_size > 0
    text = "\n".join(lines)
    for target in ("spark-1", "spark-2", "proxy"):
        assert target in text, target
    assert report, report
    # The proxy is swept at the plan's URL (https, the floating address), its certificate verified against the
    # simulation's CA (the plan's api.ca): every request answered.
    through_proxy = [row for row in report["rows"] if row["target"] == "proxy"]
    assert through_proxy and all(row["requests"] > 0 and row["errors"] == 0 for row in through_proxy), through_proxy


def test_gate_passes_each_replica_against_the_running_one(served_sim):
    for node, running in (("spark-1", "spark-2"), ("spark-2", "spark-1")):
        _runner, verdict = served_sim.toolcall_gate(node, running)
        print(f"\n{node}: {verdict['msg']}")
        assert verdict["candidate"]["score"] == 1.0, verdict


# The gate's refusal of a replica whose --tool-call-parser cannot read the model's calls runs in the rolling-upgrade
# chain (test_20), on the replica that upgrade leaves drained with such a parser: no restart of its own.
