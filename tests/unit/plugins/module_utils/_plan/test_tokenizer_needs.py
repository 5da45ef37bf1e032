# Copyright: gb10.serving maintainers
# Apache-2.0
"""The plan's tokenizer_needs: what the argv's parsers need in the model's tokenizer, from the shipped catalog."""

from __future__ import annotations

import importlib

import pytest
from _plan_fixtures import catalog_mod, replicas, run

tokenizer_mod = importlib.import_module("ansible_collections.gb10.serving.plugins.module_utils._plan.tokenizer")
AUTO = {"enable-auto-tool-choice": True}


@pytest.fixture(scope="module")
def catalog():
    return catalog_mod.load("0.32.0")


def test_the_catalog_measured_the_parsers_tokens_on_vllm(catalog):
    # sim/vllm_catalog/generate.py built each parser of vLLM 0.32.0 against a vocabulary that records its lookups
    tokens = catalog["parser_tokens"]
    assert tokens["tool_call_parsers"]["llama3_json"] == ["<|python_tag|>"]
    assert tokens["reasoning_parsers"]["deepseek_r1"] == ["<think>", "</think>"]
    assert "hermes" not in tokens["tool_call_parsers"]
    assert set(tokens["unprobed"]["tool_call_parsers"]) <= set(catalog["registries"]["tool_call_parsers"])


def test_llama3_json_with_auto_tool_choice_needs_python_tag(catalog):
    needs = tokenizer_mod.tokenizer_needs({**AUTO, "tool-call-parser": "llama3_json"}, catalog)
    assert needs == [{"option": "--tool-call-parser", "parser": "llama3_json", "tokens": ["<|python_tag|>"]}]


def test_a_tool_call_parser_without_auto_tool_choice_is_never_built(catalog):
    assert tokenizer_mod.tokenizer_needs({"tool-call-parser": "llama3_json"}, catalog) == []


def test_a_reasoning_parser_needs_its_tokens_alone(catalog):
    needs = tokenizer_mod.tokenizer_needs({"reasoning-parser": "deepseek_r1"}, catalog)
    assert needs == [{"option": "--reasoning-parser", "parser": "deepseek_r1", "tokens": ["<think>", "</think>"]}]


@pytest.mark.parametrize(
    "options",
    [
        {**AUTO, "tool-call-parser": "hermes"},  # needs none
        {**AUTO, "tool-call-parser": "plamo3"},  # not probed: needs more than a vocabulary to build
        {**AUTO, "tool-call-parser": "llama3_json", "tool-parser-plugin": "/p.py"},  # a plugin's name
        {**AUTO, "tool-call-parser": "llama3_json", "tokenizer": "org/other"},  # another tokenizer
        {**AUTO, "tool-call-parser": "llama3_json", "tokenizer-mode": "mistral"},
        {**AUTO, "tool-call-parser": "no-such-parser"},  # vllm_parser_name refuses it
    ],
)
def test_nothing_is_asked_where_the_catalog_or_the_snapshot_cannot_say(catalog, options):
    assert tokenizer_mod.tokenizer_needs(options, catalog) == []


def test_a_catalog_without_parser_tokens_asks_nothing(catalog):
    older = {key: value for key, value in catalog.items() if key != "parser_tokens"}
    assert tokenizer_mod.tokenizer_needs({**AUTO, "tool-call-parser": "llama3_json"}, older) == []
    assert tokenizer_mod.tokenizer_needs({**AUTO, "tool-call-parser": "llama3_json"}, None) == []


def test_the_plan_hands_the_tokens_to_the_nodes():
    parser = {"vllm_options__enable-auto-tool-choice": True, "vllm_options__tool-call-parser": "llama3_json"}
    result = run(replicas(**parser))
    assert result["violations"] == []
    assert result["tokenizer_needs"] == [
        {"option": "--tool-call-parser", "parser": "llama3_json", "tokens": ["<|python_tag|>"]}
    ]
    assert run(replicas())["tokenizer_needs"] == []
