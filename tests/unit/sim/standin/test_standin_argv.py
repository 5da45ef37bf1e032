# Copyright: gb10.serving maintainers
# Apache-2.0
"""The stand-in parses `vllm serve` argv as vLLM 0.32.0's argparse parser does (allow_abbrev on)."""

from __future__ import annotations

import json

import pytest
from vllm._standin import argv as av
from vllm._standin import cli

CATALOG = av.load_catalog()
SNAPSHOT = "/root/.cache/huggingface/hub/models--gb10-sim--tiny-moe/snapshots/5d0c2a8e4b1f7c3a9e6d2b8f0a4c6e1d3b5f7a9c"
# The argv `playbooks/plan.yml -e serving_profile=sim-replicas` gives spark-1 (after `vllm serve`).
PLAN_ARGV = [
    SNAPSHOT,
    "--served-model-name",
    "tiny-moe",
    "--host",
    "10.77.0.11",
    "--port",
    "8000",
    "--max-model-len",
    "8192",
    "--gpu-memory-utilization",
    "0.45",
    "--max-num-seqs",
    "4",
    "--speculative-config",
    '{"method":"mtp","num_speculative_tokens":4}',
    "--enable-auto-tool-choice",
    "--enable-prefix-caching",
    "--tool-call-parser",
    "hermes",
]


def parse(*words):
    return av.parse(CATALOG, list(words))


def error_of(*words):
    with pytest.raises(av.ArgvError) as caught:
        av.parse(CATALOG, list(words))
    return str(caught.value)


def test_plan_argv_gives_the_engine_config():
    config = av.engine_config(parse(*PLAN_ARGV))
    assert config["model"] == SNAPSHOT
    assert config["served_model_name"] == ["tiny-moe"]
    assert (config["host"], config["port"], config["max_num_seqs"]) == ("10.77.0.11", 8000, 4)
    assert config["max_model_len"] == 8192
    assert config["gpu_memory_utilization"] == pytest.approx(0.45)
    assert config["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 4}
    assert (config["enable_auto_tool_choice"], config["tool_call_parser"]) == (True, "hermes")


def test_abbreviation_is_expanded_like_argparse():
    # Real vLLM accepts the prefix (seed 004 pitfall 4 is that it silently works); the PLAN refuses it.
    assert parse("m", "--kv-cache-memory", "1000") == {"model_tag": "m", "kv_cache_memory_bytes": "1000"}
    assert parse("m", "--max-num-se=3")["max_num_seqs"] == "3"


def test_every_option_resolves_from_its_shortest_unique_prefix():
    options = sorted(o for o in CATALOG["options"] if o.startswith("--"))
    for option in options:
        prefix = next(
            (
                option[:n]
                for n in range(3, len(option) + 1)
                if [o for o in options if o.startswith(option[:n])] == [option]
            ),
            option,
        )
        assert av._resolve(prefix, CATALOG["options"])[0] == option


def test_ambiguous_prefix_is_refused():
    assert error_of("m", "--kv-cache", "x").startswith("ambiguous option: --kv-cache could match --kv-cache-dtype,")


def test_unknown_option_is_refused_with_exit_2(capsys):
    assert error_of("m", "--no-such-flag", "3") == "unrecognized arguments: --no-such-flag 3"
    assert cli.main(["serve", "m", "--no-such-flag"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [av.USAGE, "vllm serve: error: unrecognized arguments: --no-such-flag"]


def test_bad_json_is_refused_with_exit_2(capsys):
    message = error_of("m", "--limit-mm-per-prompt", "{image:0}")
    assert message.startswith("argument --limit-mm-per-prompt: Value {image:0} cannot be converted to")
    assert cli.main(["serve", "m", "--speculative-config", "{'method': 'mtp'}"]) == 2
    assert "vllm serve: error: argument --speculative-config" in capsys.readouterr().err


def test_pitfall_text_only_limits_parse_as_json():
    assert parse("m", "--limit-mm-per-prompt", '{"image":0,"video":0}')["limit_mm_per_prompt"] == {
        "image": 0,
        "video": 0,
    }


def test_json_or_string_options_take_plain_strings():
    assert parse("m", "--hf-overrides", "plain")["hf_overrides"] == "plain"
    assert "cannot be converted" in error_of("m", "--hf-overrides", "{bad}")


def test_flexible_parser_rewrites():
    assert parse("m", "--max_num_seqs", "4")["max_num_seqs"] == "4"
    given = parse("m", "--speculative-config.method", "mtp", "--speculative-config.num_speculative_tokens", "4")
    assert given["speculative_config"] == {"method": "mtp", "num_speculative_tokens": 4}


def test_value_errors_read_like_argparse():
    assert error_of("m", "--port") == "argument --port: expected one argument"
    assert error_of("m", "--port", "--host", "x") == "argument --port: expected one argument"
    assert (
        error_of("m", "--enable-prefix-caching=yes")
        == "argument --enable-prefix-caching: ignored explicit argument 'yes'"
    )
    assert error_of("a", "b") == "unrecognized arguments: b"
    with pytest.raises(av.ArgvError, match="invalid int value: 'eight'"):
        av.engine_config(parse("m", "--port", "eight"))


def test_short_options_and_switches():
    assert parse("m", "-tp", "2")["tensor_parallel_size"] == "2"
    assert parse("m", "--no-enable-prefix-caching")["enable_prefix_caching"] is False


def test_auto_tool_choice_needs_a_parser():
    with pytest.raises(TypeError, match="--enable-auto-tool-choice requires --tool-call-parser"):
        av.engine_config(parse("m", "--enable-auto-tool-choice"))


def test_no_model_means_vllms_default_repo_id():
    assert av.engine_config({})["model"] == av.DEFAULT_MODEL


def test_catalog_is_the_plans_catalog():
    plan_catalog = av.os.path.join(
        av.os.path.dirname(av.__file__),
        *[av.os.pardir] * 5,
        "plugins",
        "module_utils",
        "vllm_catalog",
        "vllm-0.32.0.json",
    )
    with open(plan_catalog, encoding="utf-8") as handle:
        assert json.load(handle)["options"] == CATALOG["options"]
