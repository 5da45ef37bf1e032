# Copyright: gb10.serving maintainers
# Apache-2.0
"""What the plan owns at its top level for the roles and playbooks that used to read the profile (issue 15 item 2):
the image gate's critical pins and the context ladder's rungs."""

from __future__ import annotations

import copy

from _plan_fixtures import shipped, shipped_plan

from ansible_collections.gb10.serving.plugins.module_utils import _plan as plan_mod


def test_plan_carries_the_critical_pins_and_the_ladder_rungs():
    replicas = shipped_plan("sim", "sim-replicas")
    assert replicas["critical_pins"] == {"flashinfer-python": "0.6.18"}
    assert replicas["context_rungs"] == shipped("sim")["profiles"]["sim-replicas"]["context_rungs"]
    # A profile without rungs climbs the plan's default ones.
    assert shipped_plan("sim", "sim-tp")["context_rungs"] == list(plan_mod.LADDER_RUNGS)


def test_plan_rungs_and_pins_are_plain_values():
    site = shipped("sim")
    profiles = copy.deepcopy(site["profiles"])
    profiles["sim-replicas"]["context_rungs"] = ["8192", 16384]
    profiles["sim-replicas"]["image"].pop("critical_pins")
    result = plan_mod.plan(
        "sim-replicas", profiles, site["nodes"], **{k: site[k] for k in ("fabric_cidr", "ray_head", "ray_workers")}
    )
    assert result["context_rungs"] == [8192, 16384] and result["critical_pins"] == {}


def test_the_sim_ladder_rungs_above_the_models_length_are_refused_by_the_plan():
    # roles/context_ladder/tasks/rung.yml plans each rung like this before anything on a node changes for it;
    # tests/integration/serving/test_40_context_ladder.py expects these words in the ladder's report.
    site = shipped("sim")
    verdicts = {}
    for rung in site["profiles"]["sim-replicas"]["context_rungs"]:
        profiles = copy.deepcopy(site["profiles"])
        profiles["sim-replicas"]["context_length"] = rung
        result = plan_mod.plan(
            "sim-replicas", profiles, site["nodes"], **{k: site[k] for k in ("fabric_cidr", "ray_head", "ray_workers")}
        )
        verdicts[rung] = [(v["node"], v["rule"], v["message"]) for v in result["violations"]]
    assert verdicts[8192] == []
    for rung in (65536, 262144):
        ((node, rule, message),) = verdicts[rung]
        assert (node, rule) == ("all", "context_length_above_model")
        assert message.startswith(
            f"context_length {rung} (--max-model-len) is above the model's length: model.max_position_embeddings "
            "is 8192, and vLLM refuses a longer --max-model-len at start"
        )
        assert "Set context_length to at most 8192" in message


def test_plan_carries_the_ladders_recall_check_needle_unless_the_profile_names_one():
    assert shipped_plan("sim", "sim-replicas")["context_recall"] == "needle"
    # The real engine serves a randomly initialised checkpoint: it does not answer the question.
    assert shipped_plan("sim", "sim-real")["context_recall"] == "prompt_tokens"


def test_the_recall_checks_the_plan_accepts_are_the_ladders():
    from ansible_collections.gb10.serving.plugins.module_utils import _ladder
    from ansible_collections.gb10.serving.plugins.module_utils._plan import rules_model

    assert rules_model.CONTEXT_RECALLS == _ladder.RECALL_CHECKS


def test_context_recall_unknown():
    # An unknown recall check is refused before the ladder starts.
    site = shipped("sim")
    profiles = copy.deepcopy(site["profiles"])
    profiles["sim-replicas"]["context_recall"] = "echo"
    result = plan_mod.plan(
        "sim-replicas", profiles, site["nodes"], **{k: site[k] for k in ("fabric_cidr", "ray_head", "ray_workers")}
    )
    (found,) = result["violations"]
    assert (found["node"], found["rule"], found["value"]) == ("all", "context_recall_unknown", "echo")
    assert found["message"].startswith("context_recall is 'echo': the context ladder knows needle, prompt_tokens")


def test_plan_carries_the_answer_check_defaults_unless_the_profile_names_its_own():
    from ansible_collections.gb10.serving.plugins.module_utils import _answer_check

    assert shipped_plan("sim", "sim-replicas")["answer_check"] == _answer_check.settings(None)


def test_answer_check_invalid():
    # The upgrade's answer check with a tolerance as large as its prompt set checks nothing: refused before any node.
    site = shipped("sim")
    profiles = copy.deepcopy(site["profiles"])
    profiles["sim-replicas"]["answer_check"] = {"prompts": ["What is 2+2?"], "tolerance": 1}
    result = plan_mod.plan(
        "sim-replicas", profiles, site["nodes"], **{k: site[k] for k in ("fabric_cidr", "ray_head", "ray_workers")}
    )
    (found,) = result["violations"]
    assert (found["node"], found["rule"]) == ("all", "answer_check_invalid")
    assert found["message"].startswith(
        "answer_check.tolerance is 1: how many of the 1 prompts may answer differently, an integer from 0 to 0."
    )
    assert "Leave answer_check out for the default set (4 prompts, 8 tokens each, none may differ)" in found["message"]
    own = copy.deepcopy(site["profiles"])
    own["sim-replicas"]["answer_check"] = {"prompts": ["What is 2+2?", "Name a colour."], "max_tokens": 4}
    planned = plan_mod.plan(
        "sim-replicas", own, site["nodes"], **{k: site[k] for k in ("fabric_cidr", "ray_head", "ray_workers")}
    )
    assert planned["violations"] == []
    assert planned["answer_check"]["prompts"] == ["What is 2+2?", "Name a colour."]
    assert planned["answer_check"]["max_tokens"] == 4
