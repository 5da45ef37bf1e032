# Copyright: gb10.serving maintainers
# Apache-2.0
"""When to stop waiting for /health: the unit's own state, read from real `systemctl show` output."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import _engine_ready

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "engine_ready"
UNIT = "gb10-vllm.service"


def shown(name):
    return _engine_ready.parse_show((FIXTURES / f"{name}.txt").read_text())


def test_parse_show_reads_every_property():
    props = shown("auto_restart")
    assert set(_engine_ready.PROPERTIES) <= set(props)
    assert (props["ActiveState"], props["SubState"], props["NRestarts"]) == ("activating", "auto-restart", "0")


def test_a_running_unit_is_waited_for():
    assert _engine_ready.judge(UNIT, shown("running"), shown("running")) is None


def test_a_unit_still_starting_is_waited_for():
    starting = {**shown("running"), "ActiveState": "activating", "SubState": "start-pre"}
    assert _engine_ready.judge(UNIT, shown("running"), starting) is None


def test_pitfall_refused_at_startup_stops_the_wait_at_the_first_exit():
    # seed 004: a refused setting surfaces after the load; systemd restarts the engine and /health never answers.
    reason = _engine_ready.judge(UNIT, shown("running"), shown("auto_restart"))
    assert reason == ("gb10-vllm.service exited (status 1, result exit-code) and waits for systemd's automatic restart")


def test_pitfall_refused_at_startup_a_restart_since_the_wait_began_stops_it():
    reason = _engine_ready.judge(UNIT, shown("running"), shown("restarted_once"))
    assert reason.startswith("gb10-vllm.service exited and systemd restarted it 1 time(s) since the wait began")


def test_a_restart_before_the_wait_began_does_not_count():
    before = {**shown("restarted_once"), "ActiveState": "active", "SubState": "running"}
    assert _engine_ready.judge(UNIT, before, before) is None


@pytest.mark.parametrize(
    ("name", "words"),
    [("stopped", "is not running (stopped, result exit-code)")],
)
def test_a_stopped_unit_stops_the_wait(name, words):
    assert words in _engine_ready.judge(UNIT, shown("running"), shown(name))


def test_a_failed_unit_stops_the_wait():
    failed = {**shown("stopped"), "ActiveState": "failed", "SubState": "failed"}
    assert (
        _engine_ready.judge(UNIT, shown("running"), failed) == "gb10-vllm.service failed (status 137, result exit-code)"
    )


def test_another_start_by_hand_stops_the_wait():
    again = {**shown("running"), "InvocationID": "0" * 32}
    assert "started again" in _engine_ready.judge(UNIT, shown("running"), again)


def test_message_names_node_url_reason_and_the_engines_words():
    text = _engine_ready.message(
        "spark-1", UNIT, "http://10.77.0.11:8000/health", 41.6, "it failed", ["INFO loading", "ValueError: no room"]
    )
    assert text.startswith(
        "spark-1: http://10.77.0.11:8000/health did not answer 200 after 42 s and will not: it failed."
    )
    assert "ValueError: no room" in text and "journalctl -u gb10-vllm.service" in text


def test_a_completion_counts_only_with_a_2xx_and_a_choice():
    assert _engine_ready.judge_completion(200, b'{"choices": [{"text": " the"}]}') is None
    assert _engine_ready.judge_completion(200, b'{"choices": []}') == "HTTP 200 without a choice"
    assert _engine_ready.judge_completion(200, b"<html>") == "HTTP 200 with a body that is no JSON object"
    assert _engine_ready.judge_completion(500, b"") == "HTTP 500"
    assert _engine_ready.judge_completion(401, b"") == "HTTP 401 (the API key is missing or wrong)"
    assert _engine_ready.judge_completion(None, b"") == "no answer"


def test_the_completion_request_carries_the_key_only_in_its_header():
    body, headers = _engine_ready.completion_request("tiny-moe", "s3cret-key")
    assert b"s3cret" not in body and headers["Authorization"] == "Bearer s3cret-key"
    assert "Authorization" not in _engine_ready.completion_request("tiny-moe", "")[1]
