# Copyright: gb10.serving maintainers
# Apache-2.0
"""The context ladder stops at a rung the plan refuses, before anything on a node changes for it (issue 7, seed 004).

sim-replicas' context_rungs are 8192, 65536, 262144 (sim-real's 4096, 8192, 65536; both serve 8192); this test climbs
two rungs, [8192, 262144] (make test's budget). The running 8192 is applied again (the units do not change: nothing
restarts) and holds (recall answered). 262144 is above tiny-moe's max_position_embeddings, 8192: the plan refuses it
(context_length_above_model), as vLLM 0.32 refuses it at start, so the rung is judged on the plan's own words and
never applied: no unit is written, nothing restarts, and the ladder stops with 8192 still serving as it was (nothing
to restore). The stand-in would refuse 262144 too, with vLLM's KV-cache ValueError (it holds about 170K tokens on
spark-1), but the plan stops it first; that refusal is unit-tested (tests/unit/sim/standin/test_standin_memory.py), as
are climbing over several held rungs and a rung the engine refuses (tests/unit/plugins/module_utils/test_ladder.py).

Nothing restarts, so it runs on the site as converged (`converged_site`: make test's is the real vLLM engine). There
the 8192 rung holds on the profile's context_recall, prompt_tokens: the random checkpoint never repeats the code,
so each replica must have read the whole prompt by vLLM's own count (usage.prompt_tokens, the model's tokenizer).
"""

from __future__ import annotations

import json
import urllib.request

import pytest
import yaml
from _api import api_headers
from _profile import GROUP_VARS

pytestmark = pytest.mark.converged_site

NODES = ("spark-1", "spark-2")


def recall(profile):
    """What the plan holds the recall answers to: the profile's context_recall, needle where it names none."""
    profiles = yaml.safe_load((GROUP_VARS / "serving_profiles.yml").read_text())["serving_profiles"]
    return profiles[profile].get("context_recall") or "needle"


UNIT = "gb10-vllm.service"
APPLY = "tests/integration/serving/serving_apply.yml"
# Short watches and loose ssh limits: on a shared 2-core host a docker-exec round trip varies by seconds.
SIM_LIMITS = {
    "context_ladder_samples": 2,
    "context_ladder_sample_interval": 2,
    "context_ladder_mem_abort_mib": 512,
    "context_ladder_ssh_limit_s": 60.0,
    "context_ladder_ssh_factor": 100.0,
    "context_ladder_health_timeout": 120,
    "context_ladder_recall_timeout": 600,
    "context_ladder_recall_poll": 2,
    "context_ladder_rungs": [8192, 262144],
}
# context_length_above_model's words (plugins/module_utils/_plan/rules_model.py) for the refused rung.
ABOVE_MODEL = (
    "the plan: [all] context_length_above_model: context_length 262144 (--max-model-len) is above the model's "
    "length: model.max_position_embeddings is 8192, and vLLM refuses a longer --max-model-len at start"
)


def _max_model_len(served_sim, node):
    request = urllib.request.Request(f"{served_sim.replica_url(node)}/v1/models", headers=api_headers())
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())["data"][0]["max_model_len"]


def _invocations(served_sim):
    """Each node's engine unit's InvocationID: a new one means the unit was (re)started."""
    return {
        node: served_sim.exec(node, "systemctl", "show", "--value", "-p", "InvocationID", UNIT).stdout.strip()
        for node in NODES
    }


def test_ladder_stops_at_the_rung_the_plan_refuses_before_anything_changes(served_sim, tmp_path):
    report_dir = tmp_path / "ladder"
    restored = False
    try:
        served_sim.wait_all_ready()
        before = _invocations(served_sim)
        assert all(before.values()), before
        served_sim.playbook(
            "playbooks/context_ladder.yml", {**SIM_LIMITS, "context_ladder_report_dir": str(report_dir)}
        )
        report = yaml.safe_load((report_dir / "context-ladder.yml").read_text())
        markdown = (report_dir / "context-ladder.md").read_text()
        print("\n" + markdown)
        assert report["planned_rungs"] == [8192, 262144]
        assert report["recall"] == recall(served_sim.profile)
        assert (report["working_rung"], report["stopped_at"], report["stopped_by"]) == (8192, 262144, "plan")
        rungs = {r["rung"]: r for r in report["rungs"]}
        assert not rungs[8192]["tripped"] and rungs[8192]["refused_by"] is None, report["rungs"]
        top = rungs[262144]
        assert (top["tripped"], top["refused_by"], top["measurements"]) == (True, "plan", {}), top
        assert top["reasons"][0] == "the plan refused --max-model-len 262144; nothing on a node changed for it"
        assert any(reason.startswith(ABOVE_MODEL) for reason in top["reasons"][1:]), top["reasons"]
        assert not [r for r in top["reasons"] if "the engine said" in r or "did not become healthy" in r]
        assert "Working rung: **8192**; stopped at 262144 (refused by the plan: nothing on a node changed" in markdown
        assert "| 262144 | all | - | - | - | - | refused by the plan |" in markdown
        assert "| 8192 | spark-1 |" in markdown and "| 262144 | spark-1 |" not in markdown

        # Nothing restarted: not the 8192 apply (units unchanged), not the refused rung, no restore.
        assert _invocations(served_sim) == before
        served_sim.wait_all_ready()
        assert {node: _max_model_len(served_sim, node) for node in NODES} == dict.fromkeys(NODES, 8192)
        for node in NODES:
            unit = served_sim.exec(node, "systemctl", "cat", UNIT).stdout
            assert "--max-model-len 8192" in unit and "262144" not in unit, (node, unit)
        restored = True
    finally:
        # Checked above; a serving apply (about 50 s) only when the test failed first.
        if not restored:
            served_sim.playbook(APPLY)
            served_sim.wait_all_ready()
            assert {node: _max_model_len(served_sim, node) for node in NODES} == dict.fromkeys(NODES, 8192)
