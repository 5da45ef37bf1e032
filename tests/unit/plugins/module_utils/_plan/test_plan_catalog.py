# Copyright: gb10.serving maintainers
# Apache-2.0
"""The vLLM flag catalog shipped with the collection, and its strict reader (seed 004 pitfall 4)."""

from __future__ import annotations

import json

import pytest
from _plan_fixtures import catalog_mod, plan_mod, shipped


@pytest.fixture(scope="module")
def catalog():
    return catalog_mod.load("0.32.0")


@pytest.mark.parametrize("version", ["0.31.0", "0.32.0", "0.33.0"])
def test_catalog_shipped_per_release_and_generated_from_the_real_parser(version):
    # issue 38 item 1: one generator, the same shape for every release (make vllm-catalogs)
    catalog = catalog_mod.load(version)
    assert set(catalog_mod.available_versions()) >= {"0.31.0", "0.32.0", "0.33.0"}
    assert catalog["generated_by"] == "roles/serving_image/files/vllm_catalog_generate.py"
    assert catalog["format"] == 2 and catalog["platform"] == "cpu"
    assert catalog["prog"] == "vllm serve"
    assert catalog["positionals"] == [{"dest": "model_tag", "nargs": "?"}]
    assert len(catalog["options"]) > 300
    assert set(catalog) == set(catalog_mod.load("0.32.0"))
    assert catalog_mod.lookup(catalog, "--kv-cache-memory")[0] == "abbreviation"


def test_the_releases_differ_as_their_parsers_do():
    # measured from the three parsers: 0.32.0 added --grpc-port (and 7 more) to 0.31.0's 422 options
    assert "--grpc-port" not in catalog_mod.load("0.31.0")["options"]
    assert catalog_mod.releases_with("--grpc-port", [catalog_mod.CATALOG_DIR])[:2] == ["0.32.0", "0.33.0"]
    assert catalog_mod.releases_with("--no-such-option", [catalog_mod.CATALOG_DIR]) == []


@pytest.mark.parametrize(
    ("version", "refused"),
    [
        ("0.32.0", False),
        ("0.33.0rc1", False),
        ("0.12.0.post2", False),
        ("0.32.0+cpu", True),
        ("latest", True),
        ("", True),
        (None, True),
        ("0.32", False),
        ("v0.32.0", True),
        ("0.32.0\n", True),
    ],
)
def test_release_problem(version, refused):
    assert bool(catalog_mod.release_problem(version)) is refused


def test_load_first_searches_the_folders_in_order(tmp_path, catalog):
    (tmp_path / "vllm-0.1.0.json").write_text(json.dumps({**catalog, "vllm_version": "0.1.0"}))
    loaded, folder = catalog_mod.load_first("0.1.0", [catalog_mod.CATALOG_DIR, str(tmp_path)])
    assert folder == str(tmp_path) and loaded["vllm_version"] == "0.1.0"
    assert catalog_mod.load_first("0.32.0", [catalog_mod.CATALOG_DIR, str(tmp_path)])[1] == catalog_mod.CATALOG_DIR
    with pytest.raises(catalog_mod.CatalogMissing, match=r"no vLLM flag catalog for release '0.2.0' \(.*0.31.0, "):
        catalog_mod.load_first("0.2.0", [catalog_mod.CATALOG_DIR, str(tmp_path)])
    (tmp_path / "vllm-0.2.0.json").write_text(json.dumps({**catalog, "vllm_version": "0.1.0"}))
    with pytest.raises(catalog_mod.CatalogError, match=r"is not a catalog of release 0\.2\.0"):
        catalog_mod.load_first("0.2.0", [str(tmp_path)])


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


def test_catalog_records_the_converter_of_every_option_and_the_parser_registries(catalog):
    # format 2, from the real parser's actions (sim/vllm_catalog/generate.py): what argparse converts each value with
    assert catalog["format"] == 2
    options = catalog["options"]
    kinds = {"switch", "str", "int", "float", "human_int", "human_int_or_auto", "json", "json_config", "json_or_str"}
    assert {spec["type"] for spec in options.values()} <= kinds | {"other"}
    assert all(spec["type"] == "switch" for spec in options.values() if not spec["takes_value"])
    expected = {
        "--max-model-len": ("human_int_or_auto", False),
        "--max-num-batched-tokens": ("human_int", False),
        "--kv-cache-memory-bytes": ("human_int", True),
        "--max-num-seqs": ("int", False),
        "--port": ("int", False),
        "--gpu-memory-utilization": ("float", False),
        "--speculative-config": ("json", True),
        "--compilation-config": ("json_config", False),
        "--hf-overrides": ("json_or_str", False),
        "--tool-call-parser": ("str", True),
    }
    assert {name: (options[name]["type"], options[name]["optional"]) for name in expected} == expected
    registries = catalog["registries"]
    assert {"hermes", "glm47", "qwen3_coder"} <= set(registries["tool_call_parsers"])
    assert {"glm45", "deepseek_r1", "qwen3"} <= set(registries["reasoning_parsers"])


@pytest.mark.parametrize(
    ("option", "word", "refused"),
    [
        ("--max-num-seqs", "4", False),
        ("--max-num-seqs", "4.0", True),
        ("--max-num-batched-tokens", "25.6k", False),
        ("--max-num-batched-tokens", "8K", False),
        ("--max-num-batched-tokens", "1.5K", True),
        ("--max-num-batched-tokens", "abc", True),
        ("--max-model-len", "auto", False),
        ("--max-model-len", "-1", False),
        ("--max-model-len", "128k", False),
        ("--gpu-memory-utilization", "0.8", False),
        ("--gpu-memory-utilization", "most", True),
        ("--kv-cache-memory-bytes", "None", False),
        ("--hf-overrides", "plain-string", False),
        ("--hf-overrides", '{"a": }', True),
        ("--tool-call-parser", "anything", False),
    ],
)
def test_value_error_mirrors_vllms_converters(catalog, option, word, refused):
    assert bool(catalog_mod.value_error(catalog["options"][option], word)) is refused


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
        (["--max-num-batched-tokens", "abc"], "'abc' is not an integer"),
        (["--gpu-memory-utilization", "high"], "'high' is not a number"),
    ],
)
def test_parse_argv_refuses_what_vllm_would_rewrite_or_reject(catalog, argv, expected):
    errors = catalog_mod.parse_argv(catalog, argv)[2]
    assert len(errors) == 1 and expected in errors[0], errors


def test_format_1_catalog_still_reads_without_types(tmp_path, catalog):
    old = {**catalog, "format": 1, "options": {"--max-num-seqs": {"takes_value": True, "nargs": None}}}
    old.pop("registries")
    (tmp_path / "vllm-0.32.0.json").write_text(json.dumps(old))
    loaded = catalog_mod.load("0.32.0", str(tmp_path))
    assert catalog_mod.parse_argv(loaded, ["--max-num-seqs", "x"])[2] == []
    assert catalog_mod.parser_names(loaded, "tool_call_parsers") is None
    (tmp_path / "vllm-0.32.0.json").write_text(json.dumps({**catalog, "format": 9}))
    with pytest.raises(catalog_mod.CatalogError, match="has format 9"):
        catalog_mod.load("0.32.0", str(tmp_path))


def test_missing_release_names_the_available_ones(tmp_path):
    with pytest.raises(catalog_mod.CatalogError, match="have: none"):
        catalog_mod.load("0.32.0", str(tmp_path))


SHIPPED = [
    ("example-pair", "glm-5.3-flash-tp2"),
    ("example-pair", "glm-replicas-mtp"),
    ("sim", "sim-replicas"),
    ("sim", "sim-real"),
    ("sim", "sim-tp"),
    ("sim", "sim-tp-ray"),
]


@pytest.mark.parametrize("version", ["0.31.0", "0.32.0", "0.33.0"])
@pytest.mark.parametrize(("inventory", "profile"), SHIPPED)
def test_every_shipped_profile_plans_with_each_release_against_its_own_catalog(inventory, profile, version):
    # issue 38 item 1: the example profiles with image.vllm_version 0.31.0, 0.32.0 and 0.33.0
    site = shipped(inventory)
    site["profiles"][profile]["image"]["vllm_version"] = version
    result = plan_mod.plan(
        profile,
        site["profiles"],
        site["nodes"],
        **{k: site[k] for k in ("fabric_cidr", "ray_head", "ray_workers", "site")},
    )
    assert result["violations"] == [], result["violations"]
    assert result["vllm_catalog"]["version"] == version and result["vllm_catalog"]["source"] == "collection"
