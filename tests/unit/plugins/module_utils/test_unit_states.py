# Copyright: gb10.serving maintainers
# Apache-2.0
"""The node's units read once a run, on real systemctl outputs: a simulated node converged by site.yml (systemd 252,
Debian 12; the same columns as Ubuntu 24.04's systemd 255 on a GB10), sim-replicas profile."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.gb10.serving.plugins.module_utils import _unit_states

FIXTURES = Path(__file__).parent / "fixtures"
UNITS = (FIXTURES / "systemctl_list-units_all_plain_sim-node_252.txt").read_text()
FILES = (FIXTURES / "systemctl_list-unit-files_sim-node_252.txt").read_text()


def test_units_and_files_read_from_real_outputs():
    units, files = _unit_states.parse_units(UNITS), _unit_states.parse_unit_files(FILES)
    assert len(units) == len(UNITS.splitlines()) == 190
    assert units["earlyoom.service"] == {"load": "loaded", "active": "active", "sub": "running"}
    # a oneshot that stays active: exited, still active (a start would change nothing)
    assert units["gb10-fabric-firewall.service"] == {"load": "loaded", "active": "active", "sub": "exited"}
    assert units["gb10-watchdog-replica.timer"]["sub"] == "waiting"
    assert units["gb10-vllm-tp.service"] == {"load": "not-found", "active": "inactive", "sub": "dead"}
    assert files["haproxy.service"] == "enabled" and files["gb10-warm-agent-replica.service"] == "static"
    assert files["serial-getty@.service"] == "disabled"


def test_up_is_active_and_enabled_only():
    states = _unit_states.unit_states(_unit_states.parse_units(UNITS), _unit_states.parse_unit_files(FILES))
    up = _unit_states.up(states)
    for unit in (
        "earlyoom.service",
        "gb10-fabric-firewall.service",
        "haproxy.service",
        "keepalived.service",
        "prometheus.service",
        "prometheus-node-exporter.service",
        "gb10-vllm.service",
    ):
        assert unit in up, unit
    # active but static (started by its socket): no enable would hold, so not up; inactive units never are
    assert "gb10-warm-agent-replica.service" not in up
    assert "gb10-watchdog-replica.service" not in up and "gb10-vllm-tp.service" not in up
    # a unit file systemd has not loaded: inactive, dead, with its file's state
    assert states["serial-getty@.service"] == {
        "load": "",
        "active": "inactive",
        "sub": "dead",
        "file_state": "disabled",
    }
    assert up == sorted(up)


def test_a_stopped_or_disabled_unit_is_not_up():
    units = _unit_states.parse_units(
        "earlyoom.service loaded inactive dead Early OOM Daemon\n"
        "haproxy.service loaded active running HAProxy Load Balancer\n"
        "keepalived.service loaded failed failed Keepalive Daemon (LVS and VRRP)\n"
    )
    files = _unit_states.parse_unit_files(
        "earlyoom.service enabled enabled\nhaproxy.service disabled enabled\nkeepalived.service enabled enabled\n"
    )
    assert _unit_states.up(_unit_states.unit_states(units, files)) == []


def test_the_current_run_of_the_units_asked_for_and_none_for_a_unit_never_started():
    shown = (FIXTURES / "systemctl_show_id_invocation_sim-node_252.txt").read_text()
    invocations = _unit_states.parse_invocations(shown)
    assert invocations == {
        "gb10-vllm.service": "0aaa7bc87d5848439aef6f1a8c987239",
        "gb10-vllm-tp.service": "",
        "earlyoom.service": "d41803aa337d40cab0402108265da4f6",
    }
    states = _unit_states.unit_states(
        _unit_states.parse_units(UNITS), _unit_states.parse_unit_files(FILES), {**invocations, "gb10-none.service": ""}
    )
    assert states["gb10-vllm.service"]["invocation"] == "0aaa7bc87d5848439aef6f1a8c987239"
    assert "invocation" not in states["haproxy.service"]
    # asked for, listed by neither: still answered (inactive, no file, no run)
    assert states["gb10-none.service"] == {
        "load": "",
        "active": "inactive",
        "sub": "dead",
        "file_state": "",
        "invocation": "",
    }
