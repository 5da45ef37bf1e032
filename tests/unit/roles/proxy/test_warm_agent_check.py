# Copyright: gb10.serving maintainers
# Apache-2.0
"""HAProxy's agent check on the node's warm agent (issue 19 item 5), live: Debian's HAProxy 2.6 on the role's rendered
configuration, a replica whose /health answers 200 from the start, and roles/serving's real gb10-warm-agent under
systemd's socket activation. The replica gets no request until its warm marker is written; a drain set through the
runtime API holds whatever the agent says; an agent that stops answering takes no warm replica out."""

from __future__ import annotations

import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from haproxy_render import NEEDS_HAPROXY, LiveHAProxy, free_port, render
from test_affinity import KEY, Replica, servers, wait_until

AGENT = Path(__file__).resolve().parents[4] / "roles" / "serving" / "files" / "gb10-warm-agent"
NEEDS_ACTIVATE = pytest.mark.skipif(
    shutil.which("systemd-socket-activate") is None, reason="needs systemd-socket-activate (Debian's systemd)"
)


def test_each_server_asks_its_nodes_warm_agent_at_the_site_port_or_its_own_and_none_at_0():
    # gb10_warm_agent_port is a default of the gb10 role, which no host's hostvars hold: the site's value, unless the
    # inventory gives the node its own (0: that node runs no agent).
    hostvars = {
        "spark-1": {"gb10_fabric_address": "192.168.200.11"},
        "spark-2": {"gb10_fabric_address": "192.168.200.12", "gb10_warm_agent_port": 9009},
        "spark-3": {"gb10_fabric_address": "192.168.200.13", "gb10_warm_agent_port": 0},
    }
    text = render(max_seqs=(4, 4, 4), hostvars=hostvars)
    lines = [line.split() for line in text.splitlines() if line.strip().startswith("server spark-")]
    checked = {words[1]: words[words.index("agent-check") :] for words in lines if "agent-check" in words}
    assert checked == {
        "spark-1": ["agent-check", "agent-addr", "192.168.200.11", "agent-port", "8009", "agent-inter", "2s"],
        "spark-2": ["agent-check", "agent-addr", "192.168.200.12", "agent-port", "9009", "agent-inter", "2s"],
    }


def _state(proxy):
    return servers(proxy)[("vllm", "spark-1")]


def _stat(proxy):
    """`show stat`'s (status, check_status) of vllm/spark-1: ("DOWN (agent)", "L7OK") while the agent alone holds it
    out."""
    rows = (line.split(",") for line in proxy.ask("show stat").splitlines() if not line.startswith("#"))
    row = next(row for row in rows if row[:2] == ["vllm", "spark-1"])
    return row[17], row[36]


def _through_the_proxy(proxy):
    request = urllib.request.Request(
        f"http://127.0.0.1:{proxy.port}/v1/models", headers={"Authorization": f"Bearer {KEY}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as refused:
        return refused.code


@NEEDS_HAPROXY
@NEEDS_ACTIVATE
def test_pitfall_cold_replica_gets_clients_only_after_its_warm_up(tmp_path):
    # Seed 004: the first request after a start compiles kernels. /health answers 200 at once here (as vLLM's does
    # before its first request); the agent's "down" keeps the server out until the warm-up writes the marker.
    replica = Replica("spark-1")
    marker = tmp_path / "gb10-warm" / "replica"
    agent_port = free_port()
    agent = subprocess.Popen(
        [
            "systemd-socket-activate",
            "-l",
            f"127.0.0.1:{agent_port}",
            sys.executable,
            str(AGENT),
            "--marker",
            str(marker),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    proxy = LiveHAProxy(
        tmp_path,
        max_seqs=(4,),
        api_key=KEY,
        replica_port=[replica.port],
        agent_ports=[agent_port],
        proxy_check_inter="500ms",
    )
    try:
        checked = proxy.check()
        assert checked.returncode == 0, checked.stdout + checked.stderr
        proxy.start()
        wait_until(
            lambda: _stat(proxy) == ("DOWN (agent)", "L7OK"), "/health passes, the agent holds it down", seconds=15
        )
        assert _through_the_proxy(proxy) == 503, "a request reached the cold replica"
        marker.parent.mkdir()
        marker.write_text("warm\n")
        wait_until(lambda: _state(proxy)["up"], "the server up once the marker is there", seconds=15)
        assert _through_the_proxy(proxy) == 200
        # A drain from the runtime API (a rolling upgrade) holds: the agent's "up" is not the admin "ready".
        proxy.ask("set server vllm/spark-1 state drain")
        wait_until(lambda: _state(proxy)["admin"] == "drain", "drained", seconds=5)
        marker.unlink()
        wait_until(lambda: not _state(proxy)["up"], "down again when the marker goes", seconds=15)
        marker.write_text("warm\n")
        wait_until(lambda: _state(proxy)["up"], "up again", seconds=15)
        assert _state(proxy)["admin"] == "drain", "the agent's answer cleared the runtime drain"
        proxy.ask("set server vllm/spark-1 state ready")
        # An agent that no longer answers leaves a warm server up (HAProxy ignores a failed agent connection).
        agent.terminate()
        agent.wait(timeout=10)
        wait_until(lambda: _state(proxy)["admin"] == "ready", "ready", seconds=5)
        assert _through_the_proxy(proxy) == 200 and _state(proxy)["up"]
    finally:
        proxy.stop()
        if agent.poll() is None:
            agent.terminate()
            agent.wait(timeout=10)
        replica.stop()
