"""toolcall_gate: uri loop results in, score and gate out."""

import json

from ansible_collections.gb10.serving.plugins.modules import toolcall_gate

CASE = {
    "id": "w",
    "kind": "single",
    "messages": [{"role": "user", "content": "weather in Oslo"}],
    "tools": [{"type": "function", "function": {"name": "get_weather"}}],
    "expect_calls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}],
}


def uri_result(args, cid="w", streamed=False):
    call = {"id": "t", "type": "function", "function": {"name": "get_weather", "arguments": args}}
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [call]}}]}
    if streamed:
        chunk = {"choices": [{"index": 0, "delta": {"tool_calls": [dict(call, index=0)]}}]}
        return {"item": {"id": cid}, "status": 200, "content": "data: " + json.dumps(chunk) + "\n\ndata: [DONE]\n"}
    return {"item": {"id": cid}, "status": 200, "json": body, "content": json.dumps(body)}


def params(**over):
    p = {
        "cases": [CASE],
        "candidate": [],
        "running": [],
        "threshold": 0.8,
        "margin": 0.05,
        "reasoning_response": None,
        "raw_generation": None,
        "end_marker": "</think>",
    }
    p.update(over)
    return p


def test_pitfall_gate_refuses_a_model_emitting_malformed_tool_calls():
    cand, _running, verdict, _reasoning = toolcall_gate.run(params(candidate=[uri_result('{"city": "Oslo"')]))
    assert verdict["ok"] is False and cand["score"] == 0.0
    assert "malformed tool call" in verdict["msg"]


def test_streamed_body_text_is_scored():
    cand, running, verdict, reasoning = toolcall_gate.run(
        params(candidate=[uri_result('{"city": "Oslo"}', streamed=True)])
    )
    assert cand["score"] == 1.0 and verdict["ok"] is True and running is None and reasoning is None


def test_failed_request_counts_as_a_failing_case():
    failed = {"item": {"id": "w"}, "status": -1, "msg": "Connection refused"}
    cand, _running, verdict, _reasoning = toolcall_gate.run(params(candidate=[failed]))
    assert verdict["ok"] is False and "Connection refused" in cand["failing"][0]["reason"]


def test_running_model_compared():
    _cand, running, verdict, _reasoning = toolcall_gate.run(
        params(candidate=[uri_result('{"city": "Oslo"}')], running=[uri_result('{"city": "Oslo"}')])
    )
    assert running["score"] == 1.0 and verdict["ok"] is True


def test_reasoning_check_is_a_warning_not_a_refusal():
    plain = {"json": {"choices": [{"message": {"content": "391", "reasoning": None}}]}}
    _cand, _running, verdict, reasoning = toolcall_gate.run(
        params(candidate=[uri_result('{"city": "Oslo"}')], reasoning_response=plain)
    )
    assert verdict["ok"] is True and reasoning["ok"] is False


def test_skipped_running_loop_means_nothing_to_compare():
    skipped = [{"item": {"id": "w"}, "skipped": True, "changed": False}]
    _cand, running, verdict, _reasoning = toolcall_gate.run(
        params(candidate=[uri_result('{"city": "Oslo"}')], running=skipped)
    )
    assert running is None and verdict["ok"] is True
