# Copyright: gb10.serving maintainers
# Apache-2.0
"""The vLLM flag catalog shipped with the collection, and its strict reader (seed 004 pitfall 4)."""

from __future__ import annotations

import json

import pytest
from _plan_fixtures import catalog_mod


@pytest.fixture(scope="module")
def catalog():
    return catalog_mod.load("0.32.0")


def test_catalog_0_32_0_shipped_and_generated_from_the_real_parser(catalog):
    assert "0.32.0" in catalog_mod.available_versions()
    assert catalog["generated_by"] == "sim/vllm_catalog/generate.py"
    assert catalog["prog"] == "vllm serve"
    assert catalog["positionals"] == [{"dest": "model_tag", "nargs": "?"}]
    assert len(catalog["options"]) > 300


def test_pitfall_kv_cache_memory_abbreviation_is_what_vllm_would_accept(catalog):
    # vLLM's own parser has allow_abbrev on: that is why the plan must refuse prefixes itself.
    assert catalog["allow_abbrev"] is True
    assert "--kv-cache-memory" not in catalog["options"]
    assert catalog_mod.lookup(catalog, "--kv-cache-memory") == ("abbreviation", ["--kv-cache-memory-bytes"])
    status, spec = catalog_mod.lookup(catalog, "--kv-cache-memory-bytes")
    assert status == "exact" and spec["takes_value"] is True


def test_catalog_marks_json_valued_and_switch_options(catalog):
    options = catalog["options"]
    assert options["--limit-mm-per-prompt"]["json"] is True
    assert options["--speculative-config"]["json"] is True
    assert options["--skip-mm-profiling"]["takes_value"] is False
    assert options["--no-enable-prefix-caching"]["takes_value"] is False
    assert options["--served-model-name"]["nargs"] == "+"
    assert "fp8" in options["--kv-cache-dtype"]["choices"]


def test_parse_argv_strict(catalog):
    argv = [
        "/root/.cache/huggingface/hub/models--a--b/snapshots/x",
        "--served-model-name",
        "m",
        "--limit-mm-per-prompt",
        json.dumps({"image": 0}),
        "--enforce-eager",
        "--max-num-seqs=4",
    ]
    positionals, options, errors = catalog_mod.parse_argv(catalog, argv)
    assert errors == []
    assert positionals == [argv[0]]
    assert options["--max-num-seqs"] == ["4"] and options["--enforce-eager"] == []


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--kv-cache-memory", "6G"], "prefix of --kv-cache-memory-bytes"),
        (["--swap-space", "4"], "is not an option of vLLM 0.32.0"),
        (["--limit-mm-per-prompt", "{image:0}"], "needs valid JSON"),
        (["--enforce-eager=yes"], "takes no value"),
        (["--max-model-len"], "needs a value"),
        (["--kv-cache-dtype", "fp9"], "must be one of"),
        (["--max_model_len", "10"], "is not an option"),
    ],
)
def test_parse_argv_refuses_what_vllm_would_rewrite_or_reject(catalog, argv, expected):
    errors = catalog_mod.parse_argv(catalog, argv)[2]
    assert len(errors) == 1 and expected in errors[0], errors


def test_missing_release_names_the_available_ones(tmp_path):
    with pytest.raises(catalog_mod.CatalogError, match="have: none"):
        catalog_mod.load("0.32.0", str(tmp_path))
