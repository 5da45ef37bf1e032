# Copyright: gb10.serving maintainers
# Apache-2.0
"""engine_ready against a real HTTP server on localhost (/health and one completion); run_command answers with real
`systemctl show` captures."""

from __future__ import annotations

import importlib
import json
import time
from pathlib import Path
from unittest import mock

import pytest
from fake_engine import fake_engine
from module_harness import run_main

REPO = Path(__file__).resolve().parents[4]
FIXTURES = REPO / "tests" / "unit" / "fixtures" / "engine_ready"
engine_ready = importlib.import_module("ansible_collections.gb10.serving.plugins.modules.engine_ready")


@pytest.fixture
def health():
    """The fake engine's /health URL, answering 503 until ``state["ok_after"]`` GETs were made, then 200."""
    with fake_engine() as (base, state):
        state["ok_after"] = 10**9
        yield f"{base}/health", state


def run(url, states, timeout=30, stop_on_exit=True, **more):
    """Run the module; each `systemctl show` answers the next capture of ``states`` (the last one repeats)."""
    answers = list(states)
    commands = []

    def run_command(self, cmd, **_kwargs):
        commands.append(cmd)
        if cmd[0] == "journalctl":
            return 0, "INFO loading the weights\nValueError: To serve at least one request ...\n", ""
        assert cmd[:3] == ["systemctl", "show", "--no-pager"] and cmd[-1] == "gb10-vllm.service", cmd
        name = answers.pop(0) if len(answers) > 1 else answers[0]
        return 0, (FIXTURES / f"{name}.txt").read_text(), ""

    args = {
        "node": "spark-1",
        "url": url,
        "completions_url": url.replace("/health", "/v1/completions"),
        "model": "tiny-moe",
        "unit": "gb10-vllm.service",
        "timeout": timeout,
        "delay": 0.05,
        "stop_on_exit": stop_on_exit,
        **more,
    }
    return run_main(engine_ready.main, args, run_command), commands


def test_ready_once_health_answers_200(health):
    url, state = health
    state["ok_after"] = 3
    result, _commands = run(url, ["running"])
    assert result["ready"] and not result["failed"] and result["polls"] == 4 and result["reason"] == ""
    assert result["generations"] == 1 and result["generation"] == ""
    [(path, request, authorization)] = state["posts"]
    assert path == "/v1/completions" and authorization is None
    assert request == {"model": "tiny-moe", "prompt": "Hello", "max_tokens": 1}


def test_pitfall_refused_at_startup_fails_at_the_first_exit_with_the_engines_words(health):
    url, _state = health
    result, commands = run(url, ["running", "running", "auto_restart"], timeout=600)
    assert result["failed"] and not result["ready"]
    assert result["polls"] == 2 and result["waited_s"] < 30
    assert "waits for systemd's automatic restart" in result["reason"]
    assert result["msg"].startswith(f"spark-1: {url} did not answer 200 after")
    assert "ValueError: To serve at least one request" in result["msg"]
    assert commands[-1][:2] == ["journalctl", "--no-pager"] and "gb10-vllm.service" in commands[-1]


def test_a_slow_start_runs_into_the_timeout(health):
    url, _state = health
    result, _commands = run(url, ["running"], timeout=1)
    assert result["failed"] and "no answer within the timeout of 1 s" in result["reason"]


def test_tensor_parallel_engine_restarting_until_its_workers_join_is_waited_for(health):
    url, state = health
    state["ok_after"] = 3
    result, _commands = run(url, ["running", "auto_restart", "restarted_once", "running"], stop_on_exit=False)
    assert result["ready"] and not result["failed"] and result["polls"] == 4


def test_pitfall_health_200_while_the_engine_is_frozen(health):
    # Issue 19: /health answers 200 from vLLM's API server while the engine core generates nothing. The wait keeps
    # asking for a completion, each within generation_timeout, and does not call the engine ready.
    url, state = health
    state["ok_after"], state["completion"] = 0, "hang"
    started = time.monotonic()
    result, _commands = run(url, ["running"], timeout=1, generation_timeout=0.3)
    assert result["failed"] and not result["ready"] and time.monotonic() - started < 5
    assert result["generations"] >= 1 and result["generation"].startswith("no answer (")
    assert "the limit is 0.3 s" in result["generation"] and "no answer within the timeout of 1 s" in result["reason"]
    assert result["msg"].startswith(f"spark-1: {url} answered 200 but {url.replace('/health', '/v1/completions')} ")


def test_health_200_with_a_failing_completion_is_not_ready(health):
    url, state = health
    state["ok_after"], state["completion"] = 0, "500"
    result, _commands = run(url, ["running"], timeout=1)
    assert result["failed"] and not result["ready"]
    assert result["generation"].startswith("HTTP 500 after ") and "the last completion of " in result["reason"]


def test_the_api_key_goes_in_the_header_and_a_missing_one_is_named(health):
    url, state = health
    state["ok_after"], state["key"] = 0, "s3cret-key"
    result, _commands = run(url, ["running"], timeout=1)
    assert result["failed"] and "HTTP 401 (the API key is missing or wrong)" in result["generation"]
    result, _commands = run(url, ["running"], api_key="s3cret-key")
    assert result["ready"] and state["posts"][-1][2] == "Bearer s3cret-key"
    assert "s3cret-key" not in json.dumps(result)


def test_the_api_key_is_a_no_log_parameter():
    spec = {}

    class Stop(Exception):
        pass

    def capture(self, argument_spec, **_kwargs):
        spec.update(argument_spec)
        raise Stop

    with mock.patch.object(engine_ready.AnsibleModule, "__init__", capture), pytest.raises(Stop):
        engine_ready.main()
    assert spec["api_key"] == {"type": "str", "no_log": True}
    assert spec["model"]["required"] and spec["completions_url"]["required"]
