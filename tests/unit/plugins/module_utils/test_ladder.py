"""Context ladder: abort criteria, the climb's next step, the report."""

from pathlib import Path

import pytest
import yaml

from ansible_collections.gb10.serving.plugins.module_utils import _ladder

EARLYOOM = Path(__file__).parents[2] / "fixtures" / "earlyoom" / "v1.7_kill_cicc.txt"


def calm(mem=20000, rtt=0.05):
    return {
        "mem_available_mib": [mem, mem + 100],
        "earlyoom_lines": [],
        "kernel_lines": [],
        "ssh_rtt_s": [rtt],
        "ssh_baseline_s": 0.05,
    }


def rung(r, nodes=None, serving_ok=True, answer="code 4711"):
    return _ladder.evaluate_rung(r, nodes or {"spark-1": calm(), "spark-2": calm()}, serving_ok, answer, "4711")


def test_rungs_default_and_refusals():
    assert _ladder.rungs() == [32768, 131072, 262144]
    for bad in ([131072, 32768], [0, 10], [32768, 32768]):
        with pytest.raises(_ladder.LadderError):
            _ladder.rungs(bad)
    with pytest.raises(_ladder.LadderError, match="above the model"):
        _ladder.rungs([32768, 262144], model_max=131072)


def test_pitfall_ladder_mem_available_below_abort_trips_on_the_tighter_node():
    out = rung(131072, {"spark-1": calm(), "spark-2": calm(mem=3500)})
    assert out["tripped"] is True
    assert out["reasons"] == ["spark-2: MemAvailable fell to 3500 MiB, below the abort threshold 4096 MiB"]
    assert out["measurements"]["spark-1"]["mem_available_min_mib"] == 20000


def test_pitfall_ladder_earlyoom_kill_trips_the_rung():
    node = calm()
    node["earlyoom_lines"] = EARLYOOM.read_text().splitlines()
    out = rung(262144, {"spark-1": node})
    assert out["tripped"] is True and any("earlyoom sent SIGTERM to cicc" in r for r in out["reasons"])


def test_pitfall_ladder_kernel_oom_and_uvm_lines_trip():
    lines = [
        "[12345.6] python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0",
        "[12345.9] Out of memory: Killed process 4242 (python3) total-vm:1234kB",
        "[12346.0] nvidia-uvm: uvm_gpu_chunk_alloc failed",
        "[12346.1] usb 1-1: new high-speed USB device",
    ]
    assert [k for k, _line in _ladder.kernel_trips(lines)] == ["kernel OOM", "kernel OOM", "UVM"]
    node = calm()
    node["kernel_lines"] = lines
    assert rung(131072, {"spark-1": node})["measurements"]["spark-1"]["kernel_trips"] == 3


def test_pitfall_ladder_ssh_latency_degrading_trips_while_memory_looks_fine():
    assert rung(131072, {"spark-1": calm(rtt=11.0)})["tripped"] is True
    slow = rung(131072, {"spark-1": calm(rtt=0.6)})
    assert slow["tripped"] is True and "baseline" in slow["reasons"][0]
    assert rung(131072, {"spark-1": calm(rtt=0.1)})["tripped"] is False


def test_unreachable_node_and_failed_serving_or_recall_trip():
    assert "no MemAvailable" in rung(32768, {"spark-1": {}})["reasons"][0]
    assert "did not become healthy" in rung(32768, serving_ok=False)["reasons"][0]
    assert "recall failed" in rung(32768, answer="I do not know")["reasons"][0]
    assert "no answer" in rung(32768, answer=None)["reasons"][0]
    assert "no answer" in rung(32768, answer=[])["reasons"][0]


def test_every_replica_must_recall():
    assert rung(32768, answer=["4711", "code 4711"])["tripped"] is False
    out = rung(32768, answer=["4711", "error: context length"])
    assert out["reasons"] == ["recall failed: answer 2 of 2 does not hold '4711'"]


def test_climb_restores_the_rung_below_the_one_that_tripped():
    planned = [32768, 131072, 262144]
    assert _ladder.next_step(planned, []) == {"action": "climb", "rung": 32768, "working": None}
    held = [rung(32768)]
    assert _ladder.next_step(planned, held) == {"action": "climb", "rung": 131072, "working": 32768}
    tripped = [*held, rung(131072, {"spark-1": calm(mem=100)})]
    assert _ladder.next_step(planned, tripped) == {"action": "restore", "rung": 32768, "working": 32768}
    all_held = [rung(r) for r in planned]
    assert _ladder.next_step(planned, all_held) == {"action": "done", "rung": None, "working": 262144}
    first = [rung(32768, serving_ok=False)]
    assert _ladder.next_step(planned, first)["working"] is None


def test_recall_prompt_is_about_the_rung_and_holds_the_needle():
    text = _ladder.recall_prompt(32768, "4711")
    words = len(text.split())
    assert 31000 < words < 32768
    assert "The secret code is 4711." in text


def test_report_yaml_and_markdown():
    planned = [32768, 131072, 262144]
    results = [rung(32768), rung(131072, {"spark-1": calm(), "spark-2": calm(mem=3000)})]
    rep = _ladder.report("sim-replicas", planned, results, {"mem_abort_mib": 4096})
    assert rep["working_rung"] == 32768 and rep["stopped_at"] == 131072
    assert yaml.safe_load(yaml.safe_dump(rep)) == rep
    md = _ladder.render_markdown(rep)
    assert "Working rung: **32768**; stopped at 131072" in md
    assert "| 131072 | spark-2 | 3000 | 0 | 0 | 0.05 | tripped |" in md
    assert "- not tried: 262144" in md
    assert "- 131072: spark-2: MemAvailable fell to 3000 MiB" in md


def test_a_rung_the_engine_refuses_is_reported_with_the_engines_words():
    refusal = (
        "ValueError: To serve at least one request with the model's max seq len (262144), (0.5 GiB KV cache is "
        "needed, which is larger than the available KV cache memory (0.32 GiB)."
    )
    result = _ladder.evaluate_rung(
        262144,
        {"spark-1": calm(), "spark-2": calm()},
        False,
        [],
        "7291",
        serving_errors={"spark-1": [refusal, refusal], "spark-2": []},
    )
    assert result["tripped"]
    assert result["reasons"][0] == "serving did not become healthy with --max-model-len 262144"
    assert result["reasons"][1] == f"spark-1: the engine said: {refusal}"
    assert len(result["reasons"]) == 2


def above_model(length):
    """context_length_above_model's violation (plugins/module_utils/_plan/rules_model.py), its message shortened."""
    return {
        "node": "all",
        "rule": "context_length_above_model",
        "value": length,
        "message": (
            f"context_length {length} (--max-model-len) is above the model's length: model.max_position_embeddings "
            "is 8192, and vLLM refuses a longer --max-model-len at start. Set context_length to at most 8192"
        ),
    }


def test_a_rung_the_plan_refuses_is_judged_on_the_plans_words_alone():
    # Whatever the (stale) observations say: the rung was never applied, so nothing of it was measured.
    out = _ladder.evaluate_rung(
        262144,
        {"spark-1": {}},
        False,
        [],
        "7291",
        {"spark-1": ["ValueError: x"]},
        plan_violations=[above_model(262144)],
    )
    assert out == {
        "rung": 262144,
        "tripped": True,
        "refused_by": "plan",
        "reasons": [
            "the plan refused --max-model-len 262144; nothing on a node changed for it",
            f"the plan: [all] context_length_above_model: {above_model(262144)['message']}",
        ],
        "measurements": {},
    }
    with_fix = _ladder.plan_refusal(65536, [{**above_model(65536), "node": "spark-2", "fix": "lower it"}])
    assert with_fix["reasons"][1].startswith("the plan: [spark-2] context_length_above_model: context_length 65536")
    assert with_fix["reasons"][1].endswith(" Fix: lower it")


def test_the_engine_refusal_and_a_held_rung_say_who_refused():
    assert rung(32768, serving_ok=False)["refused_by"] == "engine"
    assert rung(32768)["refused_by"] is None
    assert rung(32768, {"spark-1": calm(mem=100)})["refused_by"] is None  # tripped on memory, not refused


def test_a_plan_refused_rung_stops_the_climb_with_nothing_to_restore():
    planned = [8192, 65536, 262144]
    refused = _ladder.plan_refusal(65536, [above_model(65536)])
    assert _ladder.next_step(planned, [rung(8192), refused]) == {"action": "stop", "rung": 8192, "working": 8192}
    assert _ladder.next_step(planned, [refused]) == {"action": "stop", "rung": None, "working": None}
    engine = rung(65536, serving_ok=False)
    assert _ladder.next_step(planned, [rung(8192), engine])["action"] == "restore"

    rep = _ladder.report("sim-replicas", planned, [rung(8192), refused], {"mem_abort_mib": 4096})
    assert (rep["working_rung"], rep["stopped_at"], rep["stopped_by"]) == (8192, 65536, "plan")
    md = _ladder.render_markdown(rep)
    assert "Working rung: **8192**; stopped at 65536 (refused by the plan: nothing on a node changed for it)" in md
    assert "| 65536 | all | - | - | - | - | refused by the plan |" in md
    assert "| 65536 | spark-1 |" not in md
    assert "- 65536: the plan: [all] context_length_above_model: context_length 65536" in md
    assert "- not tried: 262144" in md
    engine_rep = _ladder.report("sim-replicas", planned, [rung(8192), engine], {})
    assert engine_rep["stopped_by"] == "engine"
    assert "refused by the plan" not in _ladder.render_markdown(engine_rep)


def test_pitfall_ladder_recall_of_a_model_that_does_not_answer_holds_on_the_prompt_it_took_in():
    # A randomly initialised checkpoint (the simulation's) or a base model never repeats the code, so the rung is
    # held to the engine's own count of the prompt: every replica must have read at least the prompt's words.
    words = _ladder.recall_words(8192)
    assert words == 8192 - 1024 and len(_ladder.recall_prompt(8192, "7291-8192").split()) >= words
    nodes = {"spark-1": calm(), "spark-2": calm()}
    held = _ladder.evaluate_rung(
        8192, nodes, True, ["zq zq", "xx"], "7291-8192", recall="prompt_tokens", prompt_tokens=[7301, 7301]
    )
    assert held["tripped"] is False, held["reasons"]
    # One replica refused the prompt (a 400 has no usage: 0) and one read fewer tokens than there are words.
    out = _ladder.evaluate_rung(
        8192, nodes, True, ["error: too long", "xx"], "7291-8192", recall="prompt_tokens", prompt_tokens=[0, 5000]
    )
    assert out["reasons"] == [
        f"recall failed: replica 1 of 2 read 0 prompt tokens, fewer than the prompt's {words} words "
        "(usage.prompt_tokens: the engine did not take the whole prompt in)",
        f"recall failed: replica 2 of 2 read 5000 prompt tokens, fewer than the prompt's {words} words "
        "(usage.prompt_tokens: the engine did not take the whole prompt in)",
    ]
    # Counts missing for an answer read as 0.
    assert len(_ladder.evaluate_rung(8192, nodes, True, ["a", "b"], "n", recall="prompt_tokens")["reasons"]) == 2
    with pytest.raises(_ladder.LadderError, match="recall must be one of needle, prompt_tokens"):
        _ladder.evaluate_rung(8192, nodes, True, ["a"], "n", recall="echo")


def test_the_report_says_which_recall_check_held_the_rungs():
    results = [rung(32768)]
    assert "Recall check: needle: every answer must hold the code" in _ladder.render_markdown(
        _ladder.report("sim-replicas", [32768], results, {})
    )
    rep = _ladder.report("sim-real", [32768], results, {}, recall="prompt_tokens")
    assert rep["recall"] == "prompt_tokens"
    assert "the model's recall is not judged" in _ladder.render_markdown(rep)
