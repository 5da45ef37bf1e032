# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/serving/files/gb10-warm-agent: HAProxy's agent check for one engine, "up" only while its warm marker exists
(issue 19 item 5), run here under systemd's own socket activation (systemd-socket-activate, Accept=no: fd 3)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time

import pytest
from serving_render import ROLE

SCRIPT = ROLE / "files" / "gb10-warm-agent"
_loader = importlib.machinery.SourceFileLoader("gb10_warm_agent", str(SCRIPT))
_spec = importlib.util.spec_from_loader("gb10_warm_agent", _loader)
agent = importlib.util.module_from_spec(_spec)
_loader.exec_module(agent)


def test_the_answers_are_haproxys_agent_words():
    # HAProxy 2.6 reads "up" and "down" (the rest after '#' is shown as the reason); never "ready", which would clear
    # a drain set through the runtime API.
    assert agent.answer(True) == b"up\n"
    assert agent.answer(False) == b"down #warm-up pending\n"


def test_no_socket_from_systemd_is_refused(capsys):
    assert agent.listening_socket({"LISTEN_PID": str(os.getpid() + 1), "LISTEN_FDS": "1"}) is None
    assert agent.listening_socket({}) is None
    assert agent.main(["--marker", "/nonexistent"]) == 2
    assert "no socket from systemd" in capsys.readouterr().err


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _ask(port, deadline_s=10.0):
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=2) as connection:
                return connection.makefile("rb").read()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


@pytest.mark.skipif(shutil.which("systemd-socket-activate") is None, reason="needs systemd-socket-activate")
def test_pitfall_cold_replica_gets_clients_after_a_restart_the_agent_says_down_until_the_marker(tmp_path):
    # Seed 004: the first request after a start compiles kernels. Until the warm-up writes the marker, HAProxy's
    # agent check hears "down" (the server stays DOWN whatever its /health); then "up", on every connection.
    marker = tmp_path / "warm" / "replica"
    port = _free_port()
    activate = subprocess.Popen(
        ["systemd-socket-activate", "-l", f"127.0.0.1:{port}", sys.executable, str(SCRIPT), "--marker", str(marker)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        assert _ask(port) == b"down #warm-up pending\n"
        marker.parent.mkdir()
        marker.write_text("warm\n")
        assert [_ask(port) for _attempt in range(3)] == [b"up\n"] * 3
        marker.unlink()
        assert _ask(port) == b"down #warm-up pending\n"
        assert activate.poll() is None, activate.stderr.read()
    finally:
        activate.terminate()
        activate.wait(timeout=10)
