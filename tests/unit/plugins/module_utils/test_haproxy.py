# Copyright: gb10.serving maintainers
# Apache-2.0
"""HAProxy runtime API helpers: `show servers state` as real HAProxy 2.6/2.8 prints it, drain/ready commands."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import _haproxy

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "haproxy"


def fixture(name):
    return (FIXTURES / name).read_text()


def test_parses_haproxy_28_state_by_its_header():
    servers = _haproxy.parse_servers_state(fixture("haproxy_2.8_show_servers_state.txt"))
    assert [(s["backend"], s["name"]) for s in servers][:3] == [
        ("web_servers", "web01"),
        ("web_servers", "web02"),
        ("web_servers", "backup"),
    ]
    web01 = servers[0]
    assert web01["address"] == "11.0.1.102" and web01["port"] == 80
    assert web01["up"] and web01["admin"] == "ready" and web01["weight"] == 3
    assert len(_haproxy.select(servers, "mysql_server")) == 2


def test_parses_rows_when_the_header_is_wrapped_and_reads_a_down_server():
    servers = _haproxy.parse_servers_state(fixture("haproxy_show_servers_state_down_server.txt"))
    assert [s["name"] for s in servers] == ["web1", "web2", "web1"]
    down = _haproxy.select(servers, "web_port", "web1")[0]
    assert down["operational"] == "stopped" and not down["up"] and down["check_health"] == 0
    assert _haproxy.select(servers, "magedu-test-80", "web2")[0]["up"]


def test_drained_replica_reads_as_drain_and_still_up():
    servers = _haproxy.select(_haproxy.parse_servers_state(fixture("haproxy_2.6_gb10_drained.txt")), "vllm")
    states = {s["name"]: (s["admin"], s["up"], s["address"], s["port"]) for s in servers}
    assert states == {
        "spark-1": ("ready", True, "10.84.0.11", 8000),
        "spark-2": ("drain", True, "10.84.0.12", 8000),
    }


@pytest.mark.parametrize(("admin", "expected"), [(0, "ready"), (1, "maint"), (8, "drain"), (16, "drain"), (9, "maint")])
def test_admin_state_bits(admin, expected):
    row = f"3 vllm 1 s1 10.0.0.1 2 {admin} 1 1 0 15 3 3 6 0 0 0 - 8000 -"
    assert _haproxy.parse_servers_state(row)[0]["admin"] == expected


def test_set_state_command_and_its_answers():
    command = _haproxy.set_state_command("vllm", "spark-2", "drain")
    assert command == "set server vllm/spark-2 state drain"
    _haproxy.check_answer(command, "\n")
    with pytest.raises(_haproxy.RuntimeApiError, match="No such server"):
        _haproxy.check_answer("set server vllm/nope state ready", "No such server.\n")
    # the shared fixture's refusal line, as HAProxy prints it
    refusal = fixture("haproxy_set_server_state_responses.txt").strip().splitlines()[-1]
    with pytest.raises(_haproxy.RuntimeApiError, match="static LB algorithm"):
        _haproxy.check_answer("set weight web_servers/11.0.1.103 40", refusal)


@pytest.mark.parametrize(
    ("backend", "name", "state"),
    [("vllm", "spark-2", "up"), ("vllm", "spark-2;shutdown sessions", "ready"), ("vl lm", "s", "ready")],
)
def test_set_state_command_refuses_bad_input(backend, name, state):
    with pytest.raises(ValueError):
        _haproxy.set_state_command(backend, name, state)


def test_a_held_server_is_recorded_under_its_backend_and_name():
    assert (
        _haproxy.record_path("/var/lib/gb10/proxy-admin", "vllm", "spark-2") == "/var/lib/gb10/proxy-admin/vllm/spark-2"
    )
    for bad in ("..", "spark 2", "a/b", "x;show"):
        with pytest.raises(ValueError):
            _haproxy.record_path("/d", "vllm", bad)


def test_a_record_holds_only_drain_or_maint():
    text = _haproxy.record_text("vllm", "spark-2", "drain", "rolling upgrade failed", 1764600000)
    assert _haproxy.parse_record(text) == {
        "backend": "vllm",
        "server": "spark-2",
        "state": "drain",
        "reason": "rolling upgrade failed",
        "since": 1764600000,
    }
    for junk in ("", "{", "[]", '{"state": "ready"}'):
        assert _haproxy.parse_record(junk) is None


def test_drain_writes_the_record_and_only_ready_removes_it():
    held = _haproxy.parse_record(_haproxy.record_text("vllm", "spark-2", "drain", "r", 1))
    assert _haproxy.record_change(None, "drain") == "write"
    assert _haproxy.record_change(held, "drain") is None
    assert _haproxy.record_change(held, "drain", "r") is None
    assert _haproxy.record_change(held, "drain", "another reason") == "write"
    assert _haproxy.record_change(held, "maint") == "write"
    assert _haproxy.record_change(held, "ready") == "remove"
    assert _haproxy.record_change(None, "ready") is None
    # a file that holds nothing is removed by a ready all the same
    assert _haproxy.record_change(None, "ready", present=True) == "remove"
