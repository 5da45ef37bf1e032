# Copyright: gb10.serving maintainers
# Apache-2.0
"""ladder_verdict's main(): a rung the plan refused is reported in the plan's words and stops the climb with
nothing to restore; a rung the engine refused is reported in the engine's words and restores the rung below."""

from __future__ import annotations

import importlib

from module_harness import run_main

ladder_verdict = importlib.import_module("ansible_collections.gb10.serving.plugins.modules.ladder_verdict")

ABOVE_MODEL = (
    "context_length 262144 (--max-model-len) is above the model's length: model.max_position_embeddings is 8192, "
    "and vLLM refuses a longer --max-model-len at start. Set context_length to at most 8192"
)
ENGINE = (
    "ValueError: To serve at least one request with the model's max seq len (262144), (0.5 GiB KV cache is needed, "
    "which is larger than the available KV cache memory (0.32 GiB)."
)


def calm():
    return {"mem_available_mib": [20000], "earlyoom_lines": [], "kernel_lines": [], "ssh_rtt_s": [0.05]}


MEASURED = {"mem_available_min_mib": 20000, "earlyoom_kills": 0, "kernel_trips": 0, "ssh_rtt_max_s": 0.05}
HELD = {"rung": 8192, "tripped": False, "refused_by": None, "reasons": [], "measurements": {"spark-1": MEASURED}}


def verdict(**more):
    def no_commands(self, cmd, **_kwargs):
        raise AssertionError(f"ladder_verdict runs nothing, it ran {cmd}")

    args = {
        "profile": "sim-replicas",
        "planned": [8192, 262144],
        "previous": [HELD],
        "rung": 262144,
        "nodes": {"spark-1": calm(), "spark-2": calm()},
        "serving_ok": False,
        "needle": "7291-262144",
        **more,
    }
    return run_main(ladder_verdict.main, args, no_commands)


def test_the_plan_refused_rung():
    violation = {"node": "all", "rule": "context_length_above_model", "value": 262144, "message": ABOVE_MODEL}
    out = verdict(plan_violations=[violation], serving_errors={"spark-1": [ENGINE]})
    assert not out["failed"] and not out["changed"]
    assert out["result"]["refused_by"] == "plan"
    assert out["result"]["reasons"] == [
        "the plan refused --max-model-len 262144; nothing on a node changed for it",
        f"the plan: [all] context_length_above_model: {ABOVE_MODEL}",
    ]
    assert out["next"] == {"action": "stop", "rung": 8192, "working": 8192}
    assert (out["report"]["stopped_at"], out["report"]["stopped_by"]) == (262144, "plan")
    assert "Working rung: **8192**; stopped at 262144 (refused by the plan" in out["markdown"]
    assert "the engine said" not in out["markdown"]


def test_the_engine_refused_rung():
    out = verdict(serving_errors={"spark-1": [ENGINE], "spark-2": []})
    assert out["result"]["refused_by"] == "engine"
    assert out["result"]["reasons"][:2] == [
        "serving did not become healthy with --max-model-len 262144",
        f"spark-1: the engine said: {ENGINE}",
    ]
    assert out["next"] == {"action": "restore", "rung": 8192, "working": 8192}
    assert out["report"]["stopped_by"] == "engine"
    assert "refused by the plan" not in out["markdown"]


def test_a_rung_held_on_the_prompt_tokens_each_replica_read():
    served = {"serving_ok": True, "rung": 8192, "planned": [4096, 8192], "previous": [], "needle": "7291-8192"}
    out = verdict(**served, recall="prompt_tokens", recall_answers=["zq", "zq"], recall_prompt_tokens=[7200, 7200])
    assert not out["failed"] and out["result"]["tripped"] is False, out["result"]["reasons"]
    assert out["report"]["recall"] == "prompt_tokens"
    short = verdict(**served, recall="prompt_tokens", recall_answers=["zq", "zq"], recall_prompt_tokens=[7200, 12])
    assert short["result"]["reasons"] == [
        "recall failed: replica 2 of 2 read 12 prompt tokens, fewer than the prompt's 7168 words "
        "(usage.prompt_tokens: the engine did not take the whole prompt in)"
    ]
    # The same answers held to the needle trip: neither holds the code.
    assert len(verdict(**served, recall_answers=["zq", "zq"])["result"]["reasons"]) == 2
