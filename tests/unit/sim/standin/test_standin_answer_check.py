# Copyright: gb10.serving maintainers
# Apache-2.0
"""The upgrade's answer check (module_utils/_answer_check) against the stand-in engine: replicas on the same weights
and dtype answer the greedy prompts alike, another dtype answers otherwise, so the check is meaningful in the
simulation and not a comparison of one constant answer (sim/standin/README.md: where it departs from vLLM)."""

from __future__ import annotations

import pytest
from vllm._standin import engine as eng

from ansible_collections.gb10.serving.plugins.filter.fleet import FilterModule
from ansible_collections.gb10.serving.plugins.module_utils import _answer_check as ac

F = FilterModule().filters()
PROMPTS = ["What is 2+2?", "Name a colour."]


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setenv("GB10_STANDIN_TOKENS_PER_S", "1000")
    monkeypatch.setenv("GB10_STANDIN_WARMUP_S", "0")


def test_the_stand_in_answers_alike_on_the_same_weights_and_dtype_and_differs_on_another_dtype():
    """The simulation's stand-in engine (sim/standin): the check is meaningful on it, not a constant answer."""

    def answers(engine):
        out = []
        for prompt in PROMPTS:
            request = F["answer_check_request"](prompt, "tiny-moe", 8)
            pieces = []
            summary = engine.run(request, lambda kind, text, into=pieces: into.append((kind, text)))
            out.append(ac.answer(200, eng.completion_body("tiny-moe", pieces, summary, 1, eng.new_ids())))
        return out

    def engine(dtype):
        config = {
            "model": "/snap",
            "served_model_name": ["tiny-moe"],
            "max_num_seqs": 2,
            "max_model_len": 8192,
            "enable_auto_tool_choice": False,
            "tool_call_parser": None,
            "dtype": dtype,
            "weights_digest": "w",
        }
        return eng.Engine(config)

    running = answers(engine("bfloat16"))
    assert all(a["tokens"] and len(a["tokens"]) == 8 for a in running)
    assert ac.verdict(PROMPTS, answers(engine("bfloat16")), running, 0, "c", "r")["ok"]
    refused = ac.verdict(PROMPTS, answers(engine("float16")), running, 0, "c", "r")
    assert not refused["ok"] and len(refused["differing"]) == 2
