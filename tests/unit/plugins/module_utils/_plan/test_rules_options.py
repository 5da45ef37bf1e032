# Copyright: gb10.serving maintainers
# Apache-2.0
"""One test per rule of rules_options.py, named after the rule (test_registry.py checks that each has one)."""

from __future__ import annotations

import copy
import json

from _plan_fixtures import DELETE, catalog_mod, only, replicas, rules, run


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


def test_vllm_flag_type():
    result = run(replicas(**{"vllm_options__max-num-batched-tokens": "abc"}))
    violation = only(result, "vllm_flag_type")
    assert violation["value"] == "abc" and "'abc' is not an integer" in violation["message"]
    assert "--max-num-batched-tokens" not in _argv(result)
    # vLLM's own converters: human_readable_int takes 8k and 6G, optional_type "None", float 0.5
    accepted = (("max-num-batched-tokens", "8k"), ("kv-cache-memory-bytes", "6G"), ("max-log-len", "None"))
    for option, value in (*accepted, ("kv-offloading-size", 0.5)):
        assert run(replicas(**{"vllm_options__" + option: value}))["violations"] == [], option


def test_pitfall_integer_option_given_a_word_or_a_fraction_refused():
    # seed 004 pitfall 4: a value vLLM's parser refuses costs a restart to discover; the plan refuses it first
    for option, value in (("max-num-batched-tokens", "abc"), ("max-num-batched-tokens", "1.5K"), ("max-log-len", 1.5)):
        result = run(replicas(**{"vllm_options__" + option: value}))
        assert rules(result) == ["vllm_flag_type"], (option, value, result["violations"])


def test_vllm_parser_name():
    violation = only(run(replicas(**{"vllm_options__reasoning-parser": "glm-47"})), "vllm_parser_name")
    assert violation["value"] == "glm-47" and "closest: glm47" in violation["message"]
    assert "invalid reasoning parser" in violation["message"]
    # a plugin registers names the catalog cannot list: they are its to check
    plugin = {"vllm_options__tool-call-parser": "site_parser", "vllm_options__tool-parser-plugin": "/opt/p.py"}
    assert run(replicas(**plugin))["violations"] == []


def test_pitfall_tool_call_parser_name_unknown_to_the_release_refused():
    result = run(replicas(**{"vllm_options__enable-auto-tool-choice": True, "vllm_options__tool-call-parser": "glm5"}))
    violation = only(result, "vllm_parser_name")
    assert "--tool-call-parser 'glm5' is not a registered parser of vLLM 0.32.0" in violation["message"]
    assert "glm47" in violation["message"] and "tool-parser-plugin" in violation["message"]
    names = catalog_mod.parser_names(catalog_mod.load("0.32.0"), "tool_call_parsers")
    assert {"hermes", "glm47"} <= set(names)


def test_text_only_mm_limits():
    violation = only(run(replicas(**{"vllm_options__limit-mm-per-prompt": DELETE})), "text_only_mm_limits")
    assert '{"image":0,"video":0}' in violation["message"]


def test_tool_choice_without_parser():
    violation = only(run(replicas(**{"vllm_options__enable-auto-tool-choice": True})), "tool_choice_without_parser")
    assert violation["value"] == "--enable-auto-tool-choice"


def test_vllm_argv_parse():
    # A value that reads as an option passes every option rule, but the planned argv does not parse.
    result = run(replicas(**{"vllm_options__tool-parser-plugin": "--8k"}))
    assert {v["rule"] for v in result["violations"]} == {"vllm_argv_parse"}
    assert {v["node"] for v in result["violations"]} == {"spark-a", "spark-b"}
    assert "the planned argv does not parse: --tool-parser-plugin needs a value" in [
        v["message"] for v in result["violations"]
    ]
