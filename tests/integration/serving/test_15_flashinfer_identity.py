# Copyright: gb10.serving maintainers
# Apache-2.0
"""The FlashInfer cache proven by the build's own identity (issue 17), on the served site.

- After the converge every node's prebuilt fused-MoE module is as the prebuild stamped it: zero rebuilt modules,
  and one build for the cluster (every node holds the same stamp: one node built, the others received it).
- A serving environment whose build.ninja differs from the prebuild's (another CC) is refused by the serving role
  before it writes an env file or touches a unit, naming the differing lines; the site goes on serving, untouched.

Fast on purpose: a read-only playbook, and the serving role alone (tests/integration/serving/serving_apply.yml),
which stops at the refusal, so nothing needs restoring.
"""

from __future__ import annotations

import pytest

# Changes no engine: runs on the site as converged, the real engine in make test (conftest.py).
pytestmark = pytest.mark.converged_site

NODES = ("spark-1", "spark-2")
APPLY = "tests/integration/serving/serving_apply.yml"
REBUILT = "tests/integration/serving/flashinfer_rebuilt.yml"
IDENTITY_TASK = "Refuse a serving environment that would rebuild the prebuilt FlashInfer module (compare build.ninja)"
# Debian bookworm's gcc is /usr/bin/gcc -> gcc-12: the same compiler under another name, which is exactly what
# rewrote every -ccbin on the H200 host (issue 17). The serving image's flashinfer writes CC into build.ninja.
OTHER_CC = "/usr/bin/gcc-12"
CACHE = "/var/lib/gb10/flashinfer-cache/.cache/flashinfer/0.6.18/121a/cached_ops/fused_moe_120"


def rebuilt_reports(runner, task):
    return {
        e["event_data"]["host"]: e["event_data"]["res"]
        for e in runner.events
        if e.get("event") == "runner_on_ok" and e["event_data"].get("task") == task
    }


def unit_state(sim, node):
    show = sim.exec(node, "systemctl", "show", "gb10-vllm.service", "-p", "ActiveEnterTimestamp,NRestarts").stdout
    files = sim.exec(node, "sha256sum", "/etc/gb10/serving/engine.env", "/etc/gb10/serving/secrets.env").stdout
    log = sim.exec(node, "sha256sum", f"{CACHE}/.ninja_log", f"{CACHE}/fused_moe_120.so", f"{CACHE}/build.ninja").stdout
    container = sim.exec(node, "docker", "inspect", "-f", "{{.Id}}", "gb10-vllm", check=False).stdout.strip()
    return {"unit": show, "env files": files, "cache": log, "container": container}


def test_every_node_reports_zero_rebuilt_modules_after_the_converge(served_sim):
    runner = served_sim.playbook(REBUILT)
    reports = rebuilt_reports(runner, "Report the rebuilt FlashInfer modules of this node")
    assert sorted(reports) == sorted(NODES), reports
    for node, res in reports.items():
        print(f"\n{res['message']}")
        assert res["rebuilt"] == 0, res["message"]
        # The sim's model is an MoE (tiny-moe): its fused_moe_120 was prebuilt, stamped and loaded.
        assert [m["module"] for m in res["modules"]] == ["fused_moe_120"], (node, res["modules"])
    # Built once per cluster (issue 17 item 3): a receiving node keeps the builder's stamp byte for byte (its build
    # seconds and .ninja_log figures included), where a build of its own would have written its own.
    stamps = {
        node: served_sim.exec(node, "sha256sum", f"{CACHE}/gb10-prebuild.json").stdout.split()[0] for node in NODES
    }
    assert len(set(stamps.values())) == 1, f"the nodes hold stamps of different builds: {stamps}"


def test_pitfall_serving_environment_with_another_cc_is_refused_before_the_unit_starts(served_sim):
    sim = served_sim
    before = {node: unit_state(sim, node) for node in NODES}
    # secrets.env is an env file of the serving unit that the prebuild never gets: a serving-only environment.
    runner = sim.playbook(APPLY, extravars={"serving_secrets": {"CC": OTHER_CC}}, check=False)
    assert runner.rc != 0
    failed = [e["event_data"] for e in runner.events if e.get("event") == "runner_on_failed"]
    assert sorted(d["host"] for d in failed) == sorted(NODES), [(d["host"], d["task"]) for d in failed]
    assert {d["task"] for d in failed} == {IDENTITY_TASK}
    for data in failed:
        message = data["res"]["msg"]
        print("\n" + message)
        assert message.startswith(f"{data['host']}: the serving unit would rebuild fused_moe_120"), message
        assert "No serving unit was started." in message
        assert f"+nvcc = {OTHER_CC}" in data["res"]["diff"], data["res"]["diff"]
    # Nothing was written or restarted: the refusal came before the env files, the units and the handlers.
    ran = {e["event_data"].get("task") for e in runner.events if e.get("event") == "playbook_on_task_start"}
    assert "Write the engine environment and the serving units of this node's topology from the plan" not in ran
    after = {node: unit_state(sim, node) for node in NODES}
    assert after == before
    assert sim.all_ready()
    assert sim.chat("hello")
