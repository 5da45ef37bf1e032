# Copyright: gb10.serving maintainers
# Apache-2.0
"""Tool calls are as strict as vLLM's: only a --tool-call-parser of the model's own format extracts them.

The stand-in model writes hermes calls (<tool_call>{json}</tool_call>). With another parser, vLLM cannot extract
the call and returns it as raw text in content, with no tool_calls and finish_reason stop: the rolling upgrade's
tool-call smoke test and the tool-calling gate must catch exactly that (seed 002: a tool-calling test before
every model switch).
"""

from __future__ import annotations

import json

import pytest
from standin_config import engine_config
from vllm._standin import engine as eng

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setenv("GB10_STANDIN_TOKENS_PER_S", "1000")
    monkeypatch.setenv("GB10_STANDIN_WARMUP_S", "0")


def config(parser="hermes", model="/snap"):
    return engine_config(tool_call_parser=parser, model=model)


def chat(**over):
    return {"model": "tiny-moe", "messages": [{"role": "user", "content": "weather?"}], "tools": TOOLS, **over}


def answer(engine, request):
    pieces = []
    summary = engine.run(request, lambda kind, text: pieces.append((kind, text)))
    return eng.completion_body("tiny-moe", pieces, summary, 1, eng.new_ids())["choices"][0], pieces


def test_matching_parser_extracts_the_call():
    choice, _pieces = answer(eng.Engine(config("hermes")), chat())
    assert choice["finish_reason"] == "tool_calls"
    call = choice["message"]["tool_calls"][0]["function"]
    assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"city": "sim"}
    assert choice["message"]["content"] == ""


@pytest.mark.parametrize("parser", ["llama3_json", "mistral", "pythonic"])
def test_wrong_parser_returns_the_call_as_raw_text(parser):
    choice, _pieces = answer(eng.Engine(config(parser)), chat())
    assert choice["finish_reason"] == "stop"
    assert choice["message"]["tool_calls"] == []
    content = choice["message"]["content"]
    assert content.startswith("<tool_call>") and content.endswith("</tool_call>")
    inner = json.loads(content[len("<tool_call>") : -len("</tool_call>")])
    assert inner == {"name": "get_weather", "arguments": {"city": "sim"}}


def test_wrong_parser_streams_raw_text_and_no_tool_call_deltas():
    engine = eng.Engine(config("llama3_json"))
    ids = eng.new_ids()
    deltas = []
    engine.run(chat(stream=True), lambda kind, text: deltas.append(eng.stream_delta(kind, text, ids)))
    assert deltas and all("tool_calls" not in d for d in deltas)
    assert "".join(d["content"] for d in deltas).startswith("<tool_call>")


def test_named_or_required_tool_choice_is_guided_and_needs_no_parser():
    engine = eng.Engine(config("llama3_json"))
    named = {"type": "function", "function": {"name": "get_weather"}}
    for choice_value in (named, "required"):
        choice, _pieces = answer(engine, chat(tool_choice=choice_value))
        assert choice["finish_reason"] == "tool_calls"


def test_config_json_declares_the_models_format(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"gb10_standin_tool_call_format": "llama3_json"}))
    assert eng.model_tool_call_format(tmp_path) == "llama3_json"
    choice, _pieces = answer(eng.Engine(config("llama3_json", model=str(tmp_path))), chat())
    assert choice["finish_reason"] == "tool_calls"
    choice, _pieces = answer(eng.Engine(config("hermes", model=str(tmp_path))), chat())
    assert choice["message"]["tool_calls"] == []


def test_default_format_is_hermes_without_a_declaration(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    assert eng.model_tool_call_format(tmp_path) == "hermes"
    assert eng.model_tool_call_format(tmp_path / "absent") == "hermes"
