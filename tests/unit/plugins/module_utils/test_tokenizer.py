"""_tokenizer: a snapshot's tokens as vLLM's tokenizer.get_vocab() has them, checked against the real ``tokenizers``
library (what transformers' fast tokenizer, and so vLLM, loads) on the simulation's tokenizer and on a Unigram one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import tokenizers
from tokenizers import models, pre_tokenizers, trainers

from ansible_collections.gb10.serving.plugins.module_utils import _tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "sim" / "model"))
import tiny_moe

SIM_FILES = tiny_moe.repository()[tiny_moe.REVISION_1]
LLAMA3_JSON = {"option": "--tool-call-parser", "parser": "llama3_json", "tokens": ["<|python_tag|>"]}


def snapshot(tmp_path, files):
    for name, data in files.items():
        (tmp_path / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    return str(tmp_path)


def real_vocabulary(text):
    return set(tokenizers.Tokenizer.from_str(text).get_vocab(with_added_tokens=True))


def test_the_sim_tokenizer_has_the_tokens_tokenizers_gives(tmp_path):
    tokens, source = _tokenizer.read(snapshot(tmp_path, SIM_FILES))
    assert source.endswith("tokenizer.json")
    assert tokens == real_vocabulary(SIM_FILES["tokenizer.json"].decode())
    assert {"<tool_call>", "</tool_call>", "<|im_end|>"} <= tokens


def test_a_unigram_vocabulary_is_a_list_of_pairs():
    unigram = tokenizers.Tokenizer(models.Unigram())
    unigram.pre_tokenizer = pre_tokenizers.Whitespace()
    unigram.train_from_iterator(
        ["the weather in helsinki", "convert dollars to euros"] * 20,
        trainers.UnigramTrainer(vocab_size=40, special_tokens=["<s>", "</s>"], unk_token="<s>"),
    )
    unigram.add_special_tokens(["<|python_tag|>"])
    text = unigram.to_str()
    assert isinstance(json.loads(text)["model"]["vocab"], list)
    assert _tokenizer.vocabulary(json.loads(text)) == real_vocabulary(text)


def test_added_tokens_of_the_config_count():
    tokens = _tokenizer.vocabulary({"model": {"vocab": {"a": 0}}}, {"added_tokens_decoder": {"7": {"content": "<x>"}}})
    assert tokens == {"a", "<x>"}


@pytest.mark.parametrize("broken", [{}, {"model": None}, {"model": {"vocab": 3}}, {"added_tokens": [1, {"id": 2}]}])
def test_a_tokenizer_of_another_shape_holds_nothing_it_cannot_read(broken):
    assert _tokenizer.vocabulary(broken, "not a dict") == set()


def test_missing_keeps_only_the_lacking_tokens():
    think = {"option": "--reasoning-parser", "parser": "deepseek_r1", "tokens": ["<think>", "</think>"]}
    assert _tokenizer.missing([LLAMA3_JSON, think], {"<think>"}) == [LLAMA3_JSON, {**think, "tokens": ["</think>"]}]
    assert _tokenizer.missing([LLAMA3_JSON, think], {"<think>", "</think>", "<|python_tag|>"}) == []


def test_the_message_names_the_node_the_parser_the_token_and_the_file():
    msg = _tokenizer.describe("spark-1", "/cache/snap", [LLAMA3_JSON])
    assert msg.startswith("spark-1: --tool-call-parser llama3_json needs '<|python_tag|>'")
    assert "/cache/snap/tokenizer.json" in msg and "vllm_options" in msg and "Nothing was started" in msg


def test_a_snapshot_without_tokenizer_json_is_not_read(tmp_path):
    tokens, source = _tokenizer.read(snapshot(tmp_path, {"tokenizer.model": b"\x00"}))
    assert tokens is None and "does not exist" in source


def test_a_snapshot_with_tekken_json_is_not_read(tmp_path):
    tokens, source = _tokenizer.read(snapshot(tmp_path, {**SIM_FILES, "tekken.json": b"{}"}))
    assert tokens is None and "tekken.json" in source


def test_a_tokenizer_json_that_is_not_json_is_not_read(tmp_path):
    tokens, source = _tokenizer.read(snapshot(tmp_path, {"tokenizer.json": b"{"}))
    assert tokens is None and "not readable JSON" in source
