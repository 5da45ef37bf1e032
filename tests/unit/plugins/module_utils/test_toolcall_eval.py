"""Tool-calling evaluation: scoring, stream reassembly, the gate, the reasoning check, the shipped set."""

import json
from pathlib import Path

import pytest
import yaml

from ansible_collections.gb10.serving.plugins.module_utils import _toolcall_eval as te

FIXTURES = Path(__file__).parents[2] / "fixtures" / "toolcall"
CASES_FILE = Path(__file__).parents[4] / "files" / "toolcall_eval" / "cases.yml"
# The simulation's sets: the stand-in's and the real engine's on its random checkpoint (inventories/sim serving.yml).
SIM_CASES_FILES = [Path(__file__).parents[4] / "sim" / e / "toolcall_cases.yml" for e in ("standin", "vllm_cpu")]

TOOL = {"type": "function", "function": {"name": "run_command", "parameters": {"type": "object"}}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}


def completion(*calls, content=None, **extra):
    tool_calls = [
        {"id": f"t{n}", "type": "function", "function": {"name": name, "arguments": args}}
        for n, (name, args) in enumerate(calls)
    ]
    message = {"role": "assistant", "content": content, "tool_calls": tool_calls, **extra}
    return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}]}


def case(cid="c", kind="single", calls=None, tools=(TOOL, WEATHER)):
    return {
        "id": cid,
        "kind": kind,
        "messages": [{"role": "user", "content": "x"}],
        "tools": list(tools),
        "expect_calls": calls if calls is not None else [{"name": "run_command", "arguments": {"command": "ls"}}],
    }


def test_pitfall_streamed_tool_call_arguments_arrive_in_fragments():
    text = (FIXTURES / "vllm_chat_stream_tool_calls_sse.txt").read_text()
    out = te.reassemble_stream(text)
    call = out["message"]["tool_calls"][0]
    assert call["function"] == {"name": "run_command", "arguments": '{"command": "ls"}'}
    assert call["id"] == "chatcmpl-tool-ca99dda515524c6abe47d1ea22813507"
    assert out["finish_reason"] == "tool_calls"
    assert te.score_case(case(), text)["passed"] is True


def test_stream_as_a_client_trace_saw_it_scores_the_same():
    text = (FIXTURES / "vllm_chat_stream_tool_calls_curl_trace.log").read_text()
    assert te.score_case(case(), text) == te.score_case(
        case(), (FIXTURES / "vllm_chat_stream_tool_calls_sse.txt").read_text()
    )


def test_plain_fixtures_score_right_and_wrong_arguments():
    plain = (FIXTURES / "vllm_chat_completion_tool_calls_llama31.json").read_text()
    tools = [{"type": "function", "function": {"name": "get_weather"}}]
    right = case(calls=[{"name": "get_weather", "arguments": {"city": "New York"}}], tools=tools)
    wrong = case(calls=[{"name": "get_weather", "arguments": {"city": "Boston"}}], tools=tools)
    assert te.score_case(right, plain)["passed"] is True
    failed = te.score_case(wrong, json.loads(plain))
    assert failed["passed"] is False
    assert "Boston" in failed["reason"] and "New York" in failed["reason"]


def test_contains_match_allows_extra_arguments_but_exact_does_not():
    newer = json.loads((FIXTURES / "vllm_chat_completion_tool_calls_0.23.json").read_text())
    tools = [{"type": "function", "function": {"name": "enregistrer_offre"}}]
    contains = case(
        calls=[{"name": "enregistrer_offre", "arguments": {"places": 14}, "match": "contains"}], tools=tools
    )
    exact = case(calls=[{"name": "enregistrer_offre", "arguments": {"places": 14}}], tools=tools)
    assert te.score_case(contains, newer)["passed"] is True
    assert te.score_case(exact, newer)["passed"] is False


def test_pitfall_malformed_tool_call_arguments_fail_the_case():
    for bad in ['{"command": "ls"', '["ls"]', "ls"]:
        result = te.score_case(case(), completion(("run_command", bad)))
        assert result["passed"] is False
        assert result["reason"].startswith("malformed tool call")


def test_missing_function_name_is_malformed():
    result = te.score_case(case(), completion(("", '{"command": "ls"}')))
    assert result["passed"] is False and "no function name" in result["reason"]


def test_parallel_calls_compare_as_a_set_in_any_order():
    wanted = [
        {"name": "get_weather", "arguments": {"city": "Oslo"}},
        {"name": "get_weather", "arguments": {"city": "Madrid"}},
    ]
    c = case(kind="parallel", calls=wanted)
    swapped = completion(("get_weather", '{"city": "Madrid"}'), ("get_weather", '{"city": "Oslo"}'))
    assert te.score_case(c, swapped)["passed"] is True
    twice = completion(("get_weather", '{"city": "Oslo"}'), ("get_weather", '{"city": "Oslo"}'))
    assert te.score_case(c, twice)["passed"] is False
    one = completion(("get_weather", '{"city": "Oslo"}'))
    assert te.score_case(c, one)["passed"] is False
    extra = completion(*[("get_weather", json.dumps({"city": x})) for x in ("Oslo", "Madrid", "Rome")])
    assert te.score_case(c, extra)["passed"] is False


def test_parallel_calls_reassembled_from_interleaved_stream_fragments():
    def chunk(delta, finish=None):
        return "data: " + json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    def frag(i, **function):
        return {"tool_calls": [{"index": i, "function": function}]}

    lines = [
        chunk({"role": "assistant", "content": ""}),
        chunk(frag(0, name="get_weather")),
        chunk(frag(1, name="get_weather")),
        chunk(frag(1, arguments='{"city": ')),
        chunk(frag(0, arguments='{"city": "Oslo"}')),
        chunk(frag(1, arguments='"Madrid"}')),
        chunk({}, "tool_calls"),
        "data: [DONE]",
    ]
    wanted = [
        {"name": "get_weather", "arguments": {"city": "Oslo"}},
        {"name": "get_weather", "arguments": {"city": "Madrid"}},
    ]
    assert te.score_case(case(kind="parallel", calls=wanted), "\n\n".join(lines))["passed"] is True


def test_no_call_case_must_have_no_tool_calls():
    c = case(kind="none", calls=[])
    assert te.score_case(c, completion(content="Hello!"))["passed"] is True
    called = te.score_case(c, completion(("get_weather", '{"city": "Oslo"}')))
    assert called["passed"] is False and "get_weather" in called["reason"]


def test_nested_arguments_compare_deeply():
    want = {"filter": {"status": "shipped", "total": {"min": 100, "max": 500}}, "limit": 5}
    c = case(kind="nested", calls=[{"name": "get_weather", "arguments": want}])
    assert te.score_case(c, completion(("get_weather", json.dumps(want))))["passed"] is True
    off = {"filter": {"status": "shipped", "total": {"min": 100, "max": 50}}, "limit": 5}
    assert te.score_case(c, completion(("get_weather", json.dumps(off))))["passed"] is False
    loose = case(
        kind="nested",
        calls=[{"name": "get_weather", "arguments": {"filter": {"total": {"min": 100}}}, "match": "contains"}],
    )
    assert te.score_case(loose, completion(("get_weather", json.dumps(want))))["passed"] is True


def test_error_or_missing_response_fails_with_reason():
    assert "error" in te.score_case(case(), {"error": {"message": "boom"}})["reason"]
    assert te.score_case(case(), "")["passed"] is False
    assert te.score_case(case(), {"choices": []})["passed"] is False


def test_score_is_share_passing_and_lists_failures():
    cases = [case("a"), case("b"), case("n", kind="none", calls=[])]
    good = completion(("run_command", '{"command": "ls"}'))
    result = te.score(cases, {"a": good, "b": completion(("run_command", "{")), "n": completion(content="hi")})
    assert (result["passed"], result["total"], result["score"]) == (2, 3, 0.6667)
    assert [f["id"] for f in result["failing"]] == ["b"]


def _scored(passed, total, failing=()):
    return {
        "score": passed / total,
        "passed": passed,
        "total": total,
        "failing": [{"id": f, "reason": "r"} for f in failing],
    }


def test_gate_refuses_below_threshold_with_both_scores_and_failing_cases():
    out = te.gate(_scored(15, 20, ["x", "y"]), threshold=0.8, running=_scored(17, 20))
    assert out["ok"] is False
    assert "0.75" in out["msg"] and "0.85" in out["msg"] and "x: r" in out["msg"] and "y: r" in out["msg"]


def test_gate_refuses_a_drop_larger_than_the_margin_even_above_threshold():
    out = te.gate(_scored(17, 20), threshold=0.7, running=_scored(19, 20), margin=0.05)
    assert out["ok"] is False and "below the running model" in out["msg"]
    assert te.gate(_scored(18, 20), threshold=0.7, running=_scored(19, 20), margin=0.05)["ok"] is True


def test_gate_seed_002_new_build_86_over_75_passes():
    out = te.gate(_scored(86, 100), threshold=0.7, running=_scored(75, 100))
    assert out["ok"] is True and out["running_score"] == 0.75


def test_gate_without_running_model_uses_threshold_only():
    assert te.gate(_scored(16, 20), threshold=0.8)["ok"] is True
    assert "nothing running" in te.gate(_scored(16, 20), threshold=0.8)["msg"]


def test_pitfall_reasoning_parser_judged_by_reasoning_content_not_clean_content():
    clean_but_discarded = completion(content="The answer is 4.", reasoning_content=None)
    out = te.reasoning_check(clean_but_discarded, raw_generation="2+2 is 4.</think>The answer is 4.")
    assert out["ok"] is False
    assert "not by whether content looks clean" in out["warning"]
    assert te.reasoning_check(completion(content="4", reasoning="2+2 is 4."))["ok"] is True
    legacy = completion(content="4", reasoning_content="2+2 is 4.")
    assert te.reasoning_check(legacy, raw_generation="<think>2+2  is 4.</think>4")["ok"] is True


def test_reasoning_check_refuses_reasoning_that_is_not_the_text_before_the_marker():
    out = te.reasoning_check(completion(content="4", reasoning="something else"), raw_generation="2+2 is 4.</think>4")
    assert out["ok"] is False and "differs" in out["warning"]
    unsplit = te.reasoning_check(completion(content="a</think>b", reasoning="a"))
    assert unsplit["ok"] is False


def test_reasoning_check_reads_streamed_reasoning():
    lines = [
        "data: " + json.dumps({"choices": [{"index": 0, "delta": {"reasoning": "2+2 "}}]}),
        "data: " + json.dumps({"choices": [{"index": 0, "delta": {"reasoning": "is 4."}}]}),
        "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": "4"}, "finish_reason": "stop"}]}),
    ]
    assert te.reasoning_check("\n".join(lines), raw_generation="2+2 is 4.</think>4")["ok"] is True


def test_shipped_set_has_at_least_20_cases_of_every_kind():
    cases = te.validate_cases(yaml.safe_load(CASES_FILE.read_text()))
    assert len(cases) >= 20
    kinds = {c["kind"] for c in cases}
    assert kinds == set(te.KINDS)


@pytest.mark.parametrize("path", [CASES_FILE, *SIM_CASES_FILES], ids=lambda p: str(p.parent.name))
def test_shipped_set_right_answers_score_one_and_no_calls_score_only_the_none_cases(path):
    cases = te.validate_cases(yaml.safe_load(path.read_text()))
    right = {c["id"]: completion(*[(w["name"], json.dumps(w["arguments"])) for w in c["expect_calls"]]) for c in cases}
    for c in cases:
        if not c["expect_calls"]:
            right[c["id"]] = completion(content="plain answer")
    assert te.score(cases, right)["score"] == 1.0
    silent = te.score(cases, {c["id"]: completion(content="no") for c in cases})
    assert silent["passed"] == sum(1 for c in cases if c["kind"] == "none")


def test_validate_cases_lists_every_problem():
    bad = [case("a", kind="weird"), case("a", kind="parallel"), case("n", kind="none")]
    with pytest.raises(te.CaseError) as err:
        te.validate_cases(bad)
    text = str(err.value)
    assert (
        "kind must be one of" in text and "used twice" in text and "at least two" in text and "expects no calls" in text
    )


def test_request_body_is_auto_tool_choice_and_streams_on_request():
    body = te.request_body(case(), "m", stream=True)
    assert body["tool_choice"] == "auto" and body["stream"] is True and body["temperature"] == 0
    assert "stream" not in te.request_body(case(), "m")


def test_a_case_names_its_own_tool_choice_and_the_body_carries_it():
    named = {"type": "function", "function": {"name": "run_command"}}
    for choice in ("required", "none", named):
        held = {**case(), "tool_choice": choice}
        assert te.validate_cases([held]) == [held]
        assert te.request_body(held, "m")["tool_choice"] == choice


@pytest.mark.parametrize(
    "choice",
    ["always", {"type": "function", "function": {"name": "not_offered"}}, {"function": {"name": "run_command"}}, 3],
)
def test_a_tool_choice_that_is_not_openai_s_or_names_no_tool_of_the_case_is_refused(choice):
    with pytest.raises(te.CaseError, match="tool_choice must be one of auto, required, none"):
        te.validate_cases([{**case(), "tool_choice": choice}])


def test_real_engine_sim_cases_name_a_strict_function_with_one_valid_answer():
    # A random checkpoint calls no tool by itself: each calling case of the real engine's set must force its one
    # tool and leave structured output one answer (the expected one), or the gate would score noise.
    cases = te.validate_cases(yaml.safe_load(SIM_CASES_FILES[1].read_text()))
    calling = [c for c in cases if c["expect_calls"]]
    assert calling and any(not c["expect_calls"] for c in cases)
    for c in calling:
        (tool,) = c["tools"]
        assert c["tool_choice"] == {"type": "function", "function": {"name": tool["function"]["name"]}}, c["id"]
        assert tool["function"]["strict"] is True and tool["function"]["parameters"]["additionalProperties"] is False

        def single(schema, want):
            if schema.get("type") == "object":
                return set(schema["required"]) == set(want) and all(
                    single(schema["properties"][k], v) for k, v in want.items()
                )
            return schema.get("enum") == [want]

        assert single(tool["function"]["parameters"], c["expect_calls"][0]["arguments"]), c["id"]


# ---------------------------------------------------------------------------------------- answers for the gate
def _uri_result(case_id, body, key):
    """An ansible.builtin.uri loop result as registered: the answer, and the request's invocation with its key."""
    return {
        "status": 200,
        "json": body,
        "content": json.dumps(body),
        "msg": "OK (unknown bytes)",
        "url": "http://10.0.0.11:8000/v1/chat/completions",
        "invocation": {"module_args": {"headers": {"Authorization": f"Bearer {key}"}, "body": {"model": "m"}}},
        "item": {"id": case_id, "messages": [{"role": "user", "content": "weather?"}]},
        "ansible_loop_var": "item",
    }


def test_pitfall_gate_input_carries_no_api_key():
    # Issue 18 item 5: the gate module got the registered results whole; its invocation (the task's output, the
    # node's journal) then held every request's Authorization header.
    key = "canary-key-5d0c1e7a"
    body = {"choices": [{"message": {"content": "sunny"}}]}
    results = [_uri_result("none-1", body, key), {"skipped": True, "item": {"id": "none-2"}}]
    answers = te.answers_of(results)
    assert key not in json.dumps(answers)
    assert answers == [
        {
            "json": body,
            "content": json.dumps(body),
            "msg": "OK (unknown bytes)",
            "status": 200,
            "item": {"id": "none-1"},
        },
        {"skipped": True, "item": {"id": "none-2"}},
    ]
    assert te.answer_of(_uri_result("r", body, key)) == {
        "json": body,
        "content": json.dumps(body),
        "msg": "OK (unknown bytes)",
        "status": 200,
    }
    assert te.answers_of(None) == [] and te.answer_of(None) == {}
