# Copyright: gb10.serving maintainers
# Apache-2.0
"""Chat responses shaped like vLLM's, the --max-num-seqs gate, warm-up, and vLLM's metric names."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from standin_config import engine_config as config
from vllm._standin import engine as eng

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "standin"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "enregistrer_offre",
            "parameters": {
                "type": "object",
                "properties": {"nature": {"type": "string", "enum": ["lieu", "date"]}, "places": {"type": "integer"}},
                "required": ["nature", "places"],
            },
        },
    }
]


@pytest.fixture(autouse=True)
def fast(monkeypatch):
    monkeypatch.setenv("GB10_STANDIN_TOKENS_PER_S", "1000")
    monkeypatch.setenv("GB10_STANDIN_WARMUP_S", "0")


def chat(**over):
    return {"model": "tiny-moe", "messages": [{"role": "user", "content": "hello there"}], **over}


def run(engine, request):
    pieces = []
    summary = engine.run(request, lambda kind, text: pieces.append((kind, text)))
    return pieces, summary


def test_tool_call_is_well_formed_like_the_fixture():
    engine = eng.Engine(config())
    pieces, summary = run(engine, chat(tools=TOOLS))
    body = eng.completion_body("tiny-moe", pieces, summary, 1, eng.new_ids())
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    call = choice["message"]["tool_calls"][0]
    assert call["type"] == "function" and call["id"].startswith("chatcmpl-tool-")
    assert json.loads(call["function"]["arguments"]) == {"nature": "lieu", "places": 1}
    fixture = json.loads((FIXTURES / "vllm_chat_completion_tool_calls_0.23.json").read_text())
    assert set(choice["message"]) <= set(fixture["choices"][0]["message"])
    assert set(call) == set(fixture["choices"][0]["message"]["tool_calls"][0])
    assert set(body["usage"]) <= set(fixture["usage"])


def shape(value):
    """The structure of a JSON value: keys and nesting kept, scalars replaced by their type."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(item) for item in value]
    return type(value).__name__


def test_streamed_tool_call_chunks_are_shaped_like_the_fixture():
    lines = (FIXTURES / "vllm_chat_stream_tool_calls_sse.txt").read_text().splitlines()
    real = [json.loads(line[6:]) for line in lines if line.startswith("data: {")]
    assert lines[-1] == "data: [DONE]"
    ids = eng.new_ids()
    ours = [
        eng.chunk("tiny-moe", 1, ids, {"role": "assistant", "content": ""}),
        eng.chunk("tiny-moe", 1, ids, eng.stream_delta("tool", "f", ids)),
        eng.chunk("tiny-moe", 1, ids, eng.stream_delta("args", "{}", ids)),
        eng.chunk("tiny-moe", 1, ids, {"content": ""}, finish="tool_calls"),
    ]
    for mine, theirs in zip(ours, [real[0], real[1], real[2], real[-1]], strict=True):
        assert shape(mine) == shape(theirs)


def test_streamed_tool_call_reassembles_to_json():
    engine = eng.Engine(config())
    ids = eng.new_ids()
    deltas = []
    engine.run(chat(tools=TOOLS, stream=True), lambda kind, text: deltas.append(eng.stream_delta(kind, text, ids)))
    assert deltas[0]["tool_calls"][0]["function"] == {"name": "enregistrer_offre"}
    assert deltas[0]["tool_calls"][0]["id"] == ids[1]
    arguments = "".join(d["tool_calls"][0]["function"]["arguments"] for d in deltas[1:])
    assert json.loads(arguments) == {"nature": "lieu", "places": 1}


def test_auto_tool_choice_needs_the_server_flags():
    engine = eng.Engine(config(enable_auto_tool_choice=False, tool_call_parser=None))
    with pytest.raises(eng.RequestError) as caught:
        engine.check(chat(tools=TOOLS))
    assert caught.value.status == 400
    assert '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser' in str(caught.value)
    assert engine.check(chat(tools=TOOLS, tool_choice="none"))[0] is None


def test_unknown_model_and_too_long_requests_are_refused():
    engine = eng.Engine(config(max_model_len=16))
    with pytest.raises(eng.RequestError, match=r"The model `other` does not exist\."):
        engine.check(chat(model="other"))
    with pytest.raises(eng.RequestError, match="maximum context length is 16 tokens"):
        engine.check(chat(max_tokens=100))


def test_never_more_than_max_num_seqs_running():
    engine = eng.Engine(config(max_num_seqs=3))
    seen_waiting = []
    engine.sleep = lambda s: (seen_waiting.append(engine.gate.waiting), time.sleep(0.005))
    threads = [threading.Thread(target=run, args=(engine, chat(max_tokens=4))) for _n in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert engine.gate.peak == 3
    assert max(seen_waiting) > 0
    assert (engine.gate.running, engine.gate.waiting) == (0, 0)


def test_first_request_is_slow_then_steady(monkeypatch):
    monkeypatch.setenv("GB10_STANDIN_WARMUP_S", "4")
    monkeypatch.setenv("GB10_STANDIN_TOKENS_PER_S", "20")
    sleeps = []
    engine = eng.Engine(config(), sleep=sleeps.append)
    run(engine, chat(max_tokens=8))
    first = sum(sleeps)
    sleeps.clear()
    run(engine, chat(max_tokens=8))
    assert first == pytest.approx(4 + 8 * 5 / 20)
    assert sum(sleeps) == pytest.approx(8 / 20)


def test_metrics_use_vllms_names_and_parse():
    engine = eng.Engine(config())
    run(engine, chat(max_tokens=3))
    text = generate_latest(engine.metrics.registry).decode()
    samples = {
        (s.name, s.labels.get("finished_reason")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.labels.get("model_name") == "tiny-moe"
    }
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prompt_tokens_total",
        "vllm:time_to_first_token_seconds_count",
        "vllm:e2e_request_latency_seconds_bucket",
        "vllm:inter_token_latency_seconds_sum",
    ):
        assert any(key[0] == name for key in samples), name
    assert samples[("vllm:generation_tokens_total", None)] == 3
    assert samples[("vllm:request_success_total", "length")] == 1
    assert 'vllm:num_requests_running{engine="0",model_name="tiny-moe"} 0.0' in text


def test_the_sweeps_filler_prompt_is_its_size_to_the_standin():
    # The sweep's "long" prompt of 4096 was 8067 tokens to this engine and over the simulation's 8192 with its
    # completion; the words now cost what they say, within the sweep's allowance for the question and template.
    from ansible_collections.gb10.serving.plugins.module_utils import _bench, _loadgen

    for size in (32, 512, 4096):
        counted = eng.count_tokens([{"role": "user", "content": _loadgen.filler_prompt(size)}])
        assert size <= counted <= size + _bench.PROMPT_OVERHEAD_TOKENS, (size, counted)


def test_a_wedged_engine_generates_nothing_and_never_answers():
    engine = eng.Engine(config())
    engine.wedged.set()
    done = []
    worker = threading.Thread(target=lambda: done.append(run(engine, chat(max_tokens=2))), daemon=True)
    worker.start()
    worker.join(timeout=1.0)
    assert worker.is_alive() and not done
    assert engine.gate.running == 0


def answer(engine, content, **over):
    pieces, summary = run(engine, chat(messages=[{"role": "user", "content": content}], max_tokens=8, **over))
    return "".join(text for _kind, text in pieces), summary


def test_greedy_answer_follows_prompt_weights_and_dtype_only():
    """Two replicas on the same weights and dtype answer a prompt alike; another dtype, a changed weight or another
    prompt answers otherwise (the upgrade's answer check, roles/upgrade_node)."""
    same = [
        eng.Engine(config(dtype="bfloat16", weights_digest="w1")),
        eng.Engine(config(dtype="bfloat16", weights_digest="w1")),
    ]
    assert answer(same[0], "What is 2+2?")[0] == answer(same[1], "What is 2+2?")[0]
    assert answer(same[0], "What is 2+2?")[0] != answer(same[0], "Name a colour.")[0]
    other_dtype = eng.Engine(config(dtype="float16", weights_digest="w1"))
    other_weights = eng.Engine(config(dtype="bfloat16", weights_digest="w2"))
    first = answer(same[0], "What is 2+2?")[0]
    assert answer(other_dtype, "What is 2+2?")[0] != first
    assert answer(other_weights, "What is 2+2?")[0] != first
    assert len(first.split()) == 8


def test_return_token_ids_gives_one_stable_id_per_piece():
    engine = eng.Engine(config(weights_digest="w1"))
    pieces, summary = run(engine, chat(max_tokens=5, return_token_ids=True))
    body = eng.completion_body("tiny-moe", pieces, summary, 1, eng.new_ids())
    ids = body["choices"][0]["token_ids"]
    assert ids == [eng.token_id(text) for _kind, text in pieces] and len(ids) == 5
    plain = eng.completion_body("tiny-moe", *run(engine, chat(max_tokens=5)), 1, eng.new_ids())
    assert plain["choices"][0]["token_ids"] is None
