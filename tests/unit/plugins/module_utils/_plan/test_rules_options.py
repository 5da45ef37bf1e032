# Copyright: gb10.serving maintainers
# Apache-2.0
"""One test per rule of rules_options.py, named after the rule (test_registry.py checks that each has one)."""

from __future__ import annotations

import copy
import json

from _plan_fixtures import DELETE, catalog_mod, only, replicas, run


def _argv(result, host="spark-a"):
    return result["nodes"][host]["argv"]


def test_vllm_option_name():
    result = run(replicas(**{"vllm_options__--enforce-eager": True}))
    violation = only(result, "vllm_option_name")
    assert violation["value"] == "--enforce-eager" and "'enforce-eager'" in violation["message"]
    assert "--enforce-eager" in _argv(result)  # the name is fixed up, the option kept


def test_vllm_option_owned_by_plan():
    result = run(replicas(**{"vllm_options__port": 9000}))
    violation = only(result, "vllm_option_owned_by_plan")
    assert violation["value"] == "--port" and "set port:" in violation["message"]
    assert "9000" not in _argv(result)


def test_vllm_flag_abbreviated():
    result = run(replicas(**{"vllm_options__kv-cache-memory": "3G"}))
    violation = only(result, "vllm_flag_abbreviated")
    assert violation["value"] == "--kv-cache-memory" and "--kv-cache-memory-bytes" in violation["message"]
    assert "--kv-cache-memory" not in _argv(result)


def test_vllm_flag_unknown(tmp_path):
    violation = only(run(replicas(**{"vllm_options__no-such-option": 1})), "vllm_flag_unknown")
    assert violation["value"] == "--no-such-option" and "not an option of vLLM 0.32.0" in violation["message"]
    # and the options the plan writes itself must exist in the pinned release
    catalog = copy.deepcopy(catalog_mod.load("0.32.0"))
    del catalog["options"]["--max-num-seqs"]
    (tmp_path / "vllm-0.32.0.json").write_text(json.dumps(catalog))
    result = run(replicas(), catalog_dir=str(tmp_path))
    (violation,) = [v for v in result["violations"] if v["rule"] == "vllm_flag_unknown"]
    assert violation["value"] == "--max-num-seqs" and "which this profile needs" in violation["message"]


def test_vllm_flag_needs_value():
    violation = only(run(replicas(**{"vllm_options__max-num-batched-tokens": True})), "vllm_flag_needs_value")
    assert violation["value"] == "--max-num-batched-tokens" and "give the value" in violation["message"]


def test_vllm_flag_takes_no_value():
    violation = only(run(replicas(**{"vllm_options__enforce-eager": "yes"})), "vllm_flag_takes_no_value")
    assert violation["value"] == "--enforce-eager" and "write true" in violation["message"]


def test_vllm_flag_json_invalid():
    violation = only(run(replicas(**{"vllm_options__compilation-config": "{mode: 3"})), "vllm_flag_json_invalid")
    assert violation["value"] == "{mode: 3" and "write it as a YAML mapping" in violation["message"]


def test_vllm_flag_json_shape():
    violation = only(run(replicas(**{"vllm_options__compilation-config": [1, 2]})), "vllm_flag_json_shape")
    assert violation["message"] == "--compilation-config must be a JSON object, got list"


def test_vllm_flag_choice():
    violation = only(run(replicas(**{"vllm_options__kv-cache-dtype": "int3"})), "vllm_flag_choice")
    assert violation["value"] == "int3" and "use one of" in violation["message"]


def test_text_only_mm_limits():
    violation = only(run(replicas(**{"vllm_options__limit-mm-per-prompt": DELETE})), "text_only_mm_limits")
    assert '{"image":0,"video":0}' in violation["message"]


def test_tool_choice_without_parser():
    violation = only(run(replicas(**{"vllm_options__enable-auto-tool-choice": True})), "tool_choice_without_parser")
    assert violation["value"] == "--enable-auto-tool-choice"


def test_vllm_argv_parse():
    # A value that reads as an option passes every option rule, but the planned argv does not parse.
    result = run(replicas(**{"vllm_options__max-num-batched-tokens": "--8k"}))
    assert {v["rule"] for v in result["violations"]} == {"vllm_argv_parse"}
    assert {v["node"] for v in result["violations"]} == {"spark-a", "spark-b"}
    assert "the planned argv does not parse: --max-num-batched-tokens needs a value" in [
        v["message"] for v in result["violations"]
    ]
