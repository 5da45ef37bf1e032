# Copyright: gb10.serving maintainers
# Apache-2.0
"""One test per rule of rules_inputs.py, named after the rule (test_registry.py checks that each has one)."""

from __future__ import annotations

import json

import pytest
from _plan_fixtures import nodes, only, plan_mod, replicas, rules, run, tp

# The report (issue 18): this served_model_name planned clean and rendered a second, root ExecStartPre.
INJECTED = "glm\n[Service]\nExecStartPre=/bin/sh -c 'id > /tmp/pwned'"


def test_profile_name_unsafe():
    result = plan_mod.plan("glm\nExecStartPre=/bin/true", {"glm\nExecStartPre=/bin/true": replicas()}, nodes())
    violation = only(result, "profile_name_unsafe")
    assert "letters, digits, '.', '_' and '-' only" in violation["message"]
    assert result["nodes"] == {}  # nothing is planned, so nothing is rendered


def test_served_model_name_unsafe():
    violation = only(run(replicas(model__served_model_name=INJECTED)), "served_model_name_unsafe")
    assert violation["value"] == INJECTED and "Description=" in violation["message"]
    assert (
        "e.g. 'glm-Service-ExecStartPre-" in violation["message"] and "\\n" not in violation["message"].split("e.g.")[1]
    )


@pytest.mark.parametrize("name", ["glm-5.3-flash", "org/model:fp8", "Qwen3.5-122B-A10B-FP8", "m@v1+x"])
def test_served_model_name_safe_names_pass(name):
    assert run(replicas(model__served_model_name=name))["violations"] == []


def test_env_unsafe():
    result = run(replicas(env={"BAD NAME": "1", "VLLM_LOGGING_LEVEL": "INFO\nExecStartPre=/bin/true"}))
    assert rules(result) == ["env_unsafe", "env_unsafe"]
    assert [v["value"] for v in result["violations"]] == ["BAD NAME", "VLLM_LOGGING_LEVEL"]


def test_env_secret():
    result = run(replicas(env={"HF_TOKEN": "hf_abc123", "TOKENIZERS_PARALLELISM": "false"}))
    violation = only(result, "env_secret")
    assert violation["value"] == "HF_TOKEN" and "serving_secrets" in violation["message"]
    assert "hf_abc123" not in json.dumps(result) and "hf_abc123" not in plan_mod.format_plan(result)


@pytest.mark.parametrize("name", ["VLLM_API_KEY", "aws_secret_access_key", "DB_PASSWORD", "HUGGING_FACE_HUB_TOKEN"])
def test_env_secret_names_case_insensitive(name):
    assert rules(run(replicas(env={name: "x"}))) == ["env_secret"]


def test_vllm_option_secret():
    result = run(replicas(**{"vllm_options__api-key": "sk-live-123"}))
    violation = only(result, "vllm_option_secret")
    assert violation["value"] == "--api-key" and "serving_secrets.VLLM_API_KEY" in violation["message"]
    assert "sk-live-123" not in json.dumps(result) and "sk-live-123" not in plan_mod.format_plan(result)
    assert (
        "serving_secrets.HF_TOKEN"
        in only(run(replicas(**{"vllm_options__hf-token": "t"})), "vllm_option_secret")["message"]
    )


@pytest.mark.parametrize("option", ["max-num-batched-tokens", "tokenizer-mode", "long-prefill-token-threshold"])
def test_vllm_option_secret_leaves_token_counts_alone(option):
    assert "vllm_option_secret" not in rules(run(replicas(**{"vllm_options__" + option: "auto"})))


def test_replica_address_missing():
    node_map = nodes()
    node_map["spark-b"]["fabric_address"] = None
    result = run(replicas(), node_map)
    violation = only(result, "replica_address_missing")
    assert violation["node"] == "spark-b" and "bind_all_interfaces: true" in violation["message"]
    assert "0.0.0.0" not in result["nodes"]["spark-b"]["argv"]  # no silent bind to every interface
    # the explicit setting binds every interface, and the plan says so
    result = run(replicas(bind_all_interfaces=True))
    assert result["violations"] == [] and result["bind_all_interfaces"] is True
    argv = result["nodes"]["spark-a"]["argv"]
    assert argv[argv.index("--host") + 1] == "0.0.0.0"
    assert "listen: vLLM binds 0.0.0.0, every interface of every node" in plan_mod.format_plan(result)
    assert "listen:" not in plan_mod.format_plan(run(replicas()))


def test_bind_all_interfaces():
    violation = only(run(replicas(bind_all_interfaces="yes")), "bind_all_interfaces")
    assert violation["value"] == "yes" and "write true" in violation["message"]


def test_node_address_invalid():
    node_map = nodes()
    node_map["spark-a"]["fabric_address"] = "192.168.200.11\nbackend evil"
    violation = only(run(replicas(), node_map), "node_address_invalid")
    assert violation["node"] == "spark-a" and "not an IP address" in violation["message"]


@pytest.mark.parametrize("name", ["enp1s0f0np0.4094x", "eth0:1", "eth 0", "a/b", ".."])
def test_node_interface_invalid(name):
    node_map = nodes()
    node_map["spark-b"]["fabric_interface"] = name
    violation = only(run(replicas(), node_map), "node_interface_invalid")
    assert violation["node"] == "spark-b" and violation["value"] == name


def test_fabric_cidr_invalid():
    violation = only(run(replicas(), fabric_cidr="192.168.200.0/33"), "fabric_cidr_invalid")
    assert violation["value"] == "192.168.200.0/33"
    assert run(replicas(), fabric_cidr=None)["violations"] == []
    assert "fabric_cidr_invalid" not in rules(run(tp(), fabric_cidr="nope"))  # tp_fabric_cidr says it there
