# Copyright: gb10.serving maintainers
# Apache-2.0
"""The upgrade's answer check (roles/upgrade_node, tasks/answers.yml): settings, the greedy request, what each
answer keeps, what the candidate is compared with, and the token-by-token verdict. Responses are shaped as vLLM
0.23's chat completion (tests/unit/fixtures/standin) and, where the stand-in answers, as the stand-in does."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from ansible_collections.gb10.serving.plugins.filter.fleet import FilterModule
from ansible_collections.gb10.serving.plugins.module_utils import _answer_check as ac

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "standin"
VLLM_CHAT = json.loads((FIXTURES / "vllm_chat_completion_tool_calls_0.23.json").read_text())
F = FilterModule().filters()
PROMPTS = ["What is 2+2?", "Name a colour."]


def chat(text, tokens=None, finish="length"):
    body = copy.deepcopy(VLLM_CHAT)
    choice = body["choices"][0]
    choice["message"].update(content=text, tool_calls=[])
    choice.update(finish_reason=finish, token_ids=tokens)
    return body


def test_defaults_and_a_profiles_own_settings():
    assert ac.settings(None) == {
        "enabled": True,
        "prompts": list(ac.DEFAULT_PROMPTS),
        "max_tokens": 8,
        "tolerance": 0,
    }
    mine = ac.settings({"prompts": PROMPTS, "max_tokens": 4, "tolerance": 1, "enabled": False})
    assert mine == {"enabled": False, "prompts": PROMPTS, "max_tokens": 4, "tolerance": 1}


@pytest.mark.parametrize(
    ("given", "words"),
    [
        ([], "must be a mapping"),
        ({"prompt": []}, "unknown key(s) prompt"),
        ({"prompts": []}, "a non-empty list of non-empty strings"),
        ({"prompts": ["a", "a"]}, "holds a prompt twice"),
        ({"max_tokens": 0}, "an integer from 1 to 256"),
        ({"max_tokens": True}, "an integer from 1 to 256"),
        ({"prompts": ["a", "b"], "tolerance": 2}, "an integer from 0 to 1"),
        ({"enabled": "yes"}, "true or false"),
    ],
)
def test_unusable_settings_are_named(given, words):
    with pytest.raises(ValueError, match=None) as caught:
        ac.settings(given)
    assert words in str(caught.value)


def test_request_is_greedy_short_and_asks_for_token_ids():
    body = F["answer_check_request"]("What is 2+2?", "tiny-moe", "8")
    assert body == {
        "model": "tiny-moe",
        "messages": [{"role": "user", "content": "What is 2+2?"}],
        "temperature": 0,
        "max_tokens": 8,
        "stream": False,
        "return_token_ids": True,
    }


def test_answer_keeps_tokens_text_and_finish_or_the_error():
    assert ac.answer(200, chat("Paris", [12366])) == {
        "tokens": [12366],
        "text": "Paris",
        "finish": "length",
        "error": None,
    }
    assert ac.answer(200, VLLM_CHAT)["tokens"] is None  # vLLM without return_token_ids: null
    failed = ac.answer(500, {"error": {"message": "boom"}})
    assert failed["error"].startswith('status 500 {"error": {"message": "boom"}}')
    assert ac.answer(200, {"choices": []})["error"] == "no choices in the answer"


def test_the_serving_replica_is_the_reference_when_it_loads_the_same_model():
    root = "/hf/hub/models--gb10-sim--tiny-moe/snapshots/aaa"
    assert ac.reference(root, "spark-2", root, recorded=False)["kind"] == "serving"


def test_a_new_revision_is_compared_with_recorded_answers_or_skipped_with_the_reason():
    old, new = "/hf/snapshots/aaa", "/hf/snapshots/bbb"
    skipped = ac.reference(new, "spark-2", old, recorded=False)
    assert skipped["kind"] == "skip"
    assert skipped["reason"] == (
        "answer check skipped: the model changed (spark-2 loads /hf/snapshots/aaa, the candidate /hf/snapshots/bbb) "
        "and no answers of the new one are recorded yet (the first node on a new revision records them; the next "
        "ones compare)"
    )
    assert ac.reference(new, "spark-2", old, recorded=True)["kind"] == "recorded"
    assert "no other replica serves" in ac.reference(new, None, None, recorded=False)["reason"]


def test_reference_filter_finds_this_runs_record_by_model_and_prompts():
    settings = ac.settings({"prompts": PROMPTS})
    key = ac.record_key("/hf/snapshots/bbb", settings)
    recorded = {key: [{"tokens": [1], "text": "x", "finish": "length", "error": None}] * 2}
    found = F["answer_check_reference"]("/hf/snapshots/bbb", "spark-2", "/hf/snapshots/aaa", recorded, settings)
    assert found["kind"] == "recorded" and found["answers"] == recorded[key] and found["key"] == key
    other = F["answer_check_reference"]("/hf/snapshots/ccc", "spark-2", "/hf/snapshots/aaa", recorded, settings)
    assert other["kind"] == "skip" and other["answers"] is None
    assert ac.record_key("/hf/snapshots/bbb", ac.settings({"prompts": PROMPTS, "max_tokens": 9})) != key


def test_same_answers_pass():
    answers = [ac.answer(200, chat("4", [19])), ac.answer(200, chat("Blue", [10344]))]
    found = ac.verdict(PROMPTS, answers, copy.deepcopy(answers), 0, "spark-1", "spark-2")
    assert (
        found["ok"] and found["msg"] == "spark-1 answered 2 of 2 greedy prompts as spark-2 did (0 differ, tolerance 0)"
    )


def test_a_different_answer_is_refused_with_the_prompt_and_both_answers():
    mine = [ac.answer(200, chat("4", [19])), ac.answer(200, chat("Blue sky", [10344, 1000]))]
    theirs = [ac.answer(200, chat("4", [19])), ac.answer(200, chat("Blue sea", [10344, 2000]))]
    found = ac.verdict(PROMPTS, mine, theirs, 0, "spark-1", "spark-2")
    assert not found["ok"]
    assert found["msg"] == (
        "spark-1 answered 1 of 2 greedy prompts as spark-2 did (1 differ, tolerance 0): prompt 'Name a colour.': "
        'first difference at token 1, spark-1 answered "Blue sky", spark-2 answered "Blue sea"'
    )
    assert ac.verdict(PROMPTS, mine, theirs, 1, "spark-1", "spark-2")["ok"]


def test_text_is_compared_where_an_engine_gives_no_token_ids():
    mine, theirs = [ac.answer(200, chat("abc"))] * 2, [ac.answer(200, chat("abd"))] * 2
    found = ac.verdict(PROMPTS, mine, theirs, 0, "c", "r")
    assert "first difference at character 2" in found["msg"] and len(found["differing"]) == 2


def test_a_failed_answer_or_another_finish_differs():
    good = ac.answer(200, chat("4", [19]))
    assert not ac.verdict(PROMPTS[:1], [ac.answer(500, None)], [good], 0, "c", "r")["ok"]
    stopped = ac.answer(200, chat("4", [19], finish="stop"))
    assert not ac.verdict(PROMPTS[:1], [stopped], [good], 0, "c", "r")["ok"]
