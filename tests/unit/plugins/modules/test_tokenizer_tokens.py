"""tokenizer_tokens on a real snapshot folder with the simulation's tokenizer files."""

from __future__ import annotations

import sys
from pathlib import Path

from module_harness import run_main

from ansible_collections.gb10.serving.plugins.modules import tokenizer_tokens

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "sim" / "model"))
import tiny_moe

FILES = tiny_moe.repository()[tiny_moe.REVISION_1]
LLAMA3_JSON = {"option": "--tool-call-parser", "parser": "llama3_json", "tokens": ["<|python_tag|>"]}
HERMES_TAGS = {"option": "--tool-call-parser", "parser": "hermes", "tokens": ["<tool_call>", "</tool_call>"]}


def no_commands(_self, cmd, **_kwargs):
    raise AssertionError(f"tokenizer_tokens runs no command: {cmd}")


def run(tmp_path, needs, fail_missing=True, files=FILES):
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    args = {"node": "spark-1", "snapshot_path": str(tmp_path), "needs": needs, "fail_missing": fail_missing}
    return run_main(tokenizer_tokens.main, args, no_commands)


def test_llama3_json_on_a_tokenizer_without_python_tag_is_refused_before_the_load(tmp_path):
    # vLLM 0.32 loaded the sim model, then refused to start: "Llama3JsonToolParser could not locate the bot token
    # '<|python_tag|>' in the tokenizer" (measured on the simulation's replicas, sim/vllm_cpu/README.md).
    result = run(tmp_path, [LLAMA3_JSON])
    assert result["failed"] and result["checked"] and not result["changed"]
    assert result["missing"] == [LLAMA3_JSON]
    assert result["msg"].startswith("spark-1: --tool-call-parser llama3_json needs '<|python_tag|>'")


def test_the_tokens_of_the_models_own_format_pass(tmp_path):
    result = run(tmp_path, [HERMES_TAGS])
    assert not result.get("failed") and result["missing"] == [] and result["checked"]
    assert "holds every token --tool-call-parser hermes needs" in result["msg"]


def test_without_fail_missing_it_reports(tmp_path):
    result = run(tmp_path, [LLAMA3_JSON], fail_missing=False)
    assert not result.get("failed") and result["missing"] == [LLAMA3_JSON]


def test_a_snapshot_without_tokenizer_json_is_not_checked(tmp_path):
    result = run(tmp_path, [LLAMA3_JSON], files={"config.json": b"{}"})
    assert not result.get("failed") and not result["checked"] and "not checked" in result["msg"]
