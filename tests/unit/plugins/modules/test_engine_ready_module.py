# Copyright: gb10.serving maintainers
# Apache-2.0
"""engine_ready against a real HTTP server on localhost; run_command answers with real `systemctl show` captures."""

from __future__ import annotations

import importlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from module_harness import run_main

REPO = Path(__file__).resolve().parents[4]
FIXTURES = REPO / "tests" / "unit" / "fixtures" / "engine_ready"
engine_ready = importlib.import_module("ansible_collections.gb10.serving.plugins.modules.engine_ready")


@pytest.fixture
def health():
    """A /health that answers 503 until ``ok_after`` requests were made, then 200."""
    state = {"asked": 0, "ok_after": 10**9}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            state["asked"] += 1
            self.send_response(200 if state["asked"] > state["ok_after"] else 503)
            self.end_headers()

        def log_message(self, *_args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/health", state
    server.shutdown()


def run(url, states, timeout=30, stop_on_exit=True):
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
        "unit": "gb10-vllm.service",
        "timeout": timeout,
        "delay": 0.05,
        "stop_on_exit": stop_on_exit,
    }
    return run_main(engine_ready.main, args, run_command), commands


def test_ready_once_health_answers_200(health):
    url, state = health
    state["ok_after"] = 3
    result, _commands = run(url, ["running"])
    assert result["ready"] and not result["failed"] and result["polls"] == 4 and result["reason"] == ""


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
