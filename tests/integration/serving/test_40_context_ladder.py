# Copyright: gb10.serving maintainers
# Apache-2.0
"""The context ladder climbs to a rung the stand-in cannot hold and restores the one below (issue 7, seed 004).

sim-replicas' context_rungs are 8192, 65536, 262144; this test climbs two of them, [8192, 262144] (make test's
budget: each rung that changes restarts both replicas): the running 8192 holds (recall answered), 262144 is refused
at startup with vLLM's own ValueError (the stand-in's KV cache is sized from its share of a GB10 scaled down 128
times). The ladder stops there, restores 8192 as the working configuration (a restart: 262144 was written to the
units) and writes its report (YAML and Markdown). Climbing over several held rungs is unit-tested
(tests/unit/plugins/module_utils/test_ladder.py).
"""

from __future__ import annotations

import json
import urllib.request

import yaml
from _api import api_headers

NODES = ("spark-1", "spark-2")
APPLY = "tests/integration/serving/serving_apply.yml"
# Short watches and loose ssh limits: on a shared 2-core host a docker-exec round trip varies by seconds.
SIM_LIMITS = {
    "context_ladder_samples": 2,
    "context_ladder_sample_interval": 2,
    "context_ladder_mem_abort_mib": 512,
    "context_ladder_ssh_limit_s": 60.0,
    "context_ladder_ssh_factor": 100.0,
    # The rung the stand-in cannot hold ends the wait at its first exit (gb10.serving.engine_ready), not here.
    "context_ladder_health_timeout": 120,
    "context_ladder_recall_timeout": 600,
    "context_ladder_recall_poll": 2,
    "context_ladder_rungs": [8192, 262144],
}


def _max_model_len(served_sim, node):
    request = urllib.request.Request(f"{served_sim.replica_url(node)}/v1/models", headers=api_headers())
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())["data"][0]["max_model_len"]


def test_ladder_stops_at_the_rung_the_stand_in_cannot_hold_and_restores_the_one_below(served_sim, tmp_path):
    report_dir = tmp_path / "ladder"
    restored = False
    try:
        served_sim.playbook(
            "playbooks/context_ladder.yml", {**SIM_LIMITS, "context_ladder_report_dir": str(report_dir)}
        )
        report = yaml.safe_load((report_dir / "context-ladder.yml").read_text())
        markdown = (report_dir / "context-ladder.md").read_text()
        print("\n" + markdown)
        assert report["planned_rungs"] == [8192, 262144]
        assert (report["working_rung"], report["stopped_at"]) == (8192, 262144)
        held = {r["rung"]: r for r in report["rungs"]}
        assert not held[8192]["tripped"], report["rungs"]
        top = held[262144]
        assert top["tripped"]
        assert "serving did not become healthy with --max-model-len 262144" in top["reasons"]
        refusals = [r for r in top["reasons"] if "To serve at least one request with the model's max seq len" in r]
        assert refusals, top["reasons"]
        assert "Working rung: **8192**; stopped at 262144" in markdown
        assert "| 262144 | spark-1 |" in markdown

        # The restored working configuration: both replicas serve with --max-model-len 8192 again.
        served_sim.wait_all_ready()
        assert {node: _max_model_len(served_sim, node) for node in NODES} == dict.fromkeys(NODES, 8192)
        unit = served_sim.exec("spark-1", "systemctl", "cat", "gb10-vllm.service").stdout
        assert "--max-model-len 8192" in unit and "262144" not in unit
        restored = True
    finally:
        # The ladder's own restore was checked above; a serving apply (about 50 s) only when the test failed first.
        if not restored:
            served_sim.playbook(APPLY)
            served_sim.wait_all_ready()
            assert {node: _max_model_len(served_sim, node) for node in NODES} == dict.fromkeys(NODES, 8192)
