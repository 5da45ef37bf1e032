"""Filters of the tool-calling gate: the body every gate sends is the evaluation's own."""

import pytest

from ansible_collections.gb10.serving.plugins.filter.toolcall_answers import FilterModule
from ansible_collections.gb10.serving.plugins.module_utils import _toolcall_eval

F = FilterModule().filters()

CASE = {
    "id": "weather",
    "messages": [{"role": "user", "content": "Weather in Oulu?"}],
    "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}],
    "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
}


def test_request_is_the_evaluations_body_with_the_cases_tool_choice():
    body = F["toolcall_request"](CASE, "gb10-sim", max_tokens="256")  # an inventory's digits
    assert body == _toolcall_eval.request_body(CASE, "gb10-sim", max_tokens=256)
    assert body["tool_choice"] == CASE["tool_choice"] and body["max_tokens"] == 256
    assert "stream" not in body


@pytest.mark.parametrize(("given", "streams"), [(True, True), ("true", True), ("false", False), (False, False)])
def test_request_streams_only_when_asked_as_extra_vars_spell_it(given, streams):
    assert ("stream" in F["toolcall_request"](CASE, "m", stream=given)) is streams


def test_request_without_a_tool_choice_lets_the_model_decide():
    held = {k: v for k, v in CASE.items() if k != "tool_choice"}
    assert F["toolcall_request"](held, "m")["tool_choice"] == "auto"
