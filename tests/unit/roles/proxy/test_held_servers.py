# Copyright: gb10.serving maintainers
# Apache-2.0
"""A drain that lasts (issue 19, item 6): gb10.serving.haproxy_server records a held server on the proxy's node, the
haproxy.service drop-in's gb10-haproxy-save-state puts it in the server-state file at every start and reload, and a
real HAProxy 2.6 (Debian's, what the nodes run) comes back with it drained; only a ready releases it."""

from __future__ import annotations

import json
import re

import pytest
from haproxy_render import NEEDS_HAPROXY, ROLE, LiveHAProxy, render
from module_harness import run_main
from test_save_state import save_state

from ansible_collections.gb10.serving.plugins.module_utils import _haproxy
from ansible_collections.gb10.serving.plugins.modules import haproxy_server


def _no_commands(*args, **kwargs):
    raise AssertionError("haproxy_server runs no command")


def module(proxy, records, **args):
    return run_main(
        haproxy_server.main,
        {"socket": proxy.socket, "backend": "vllm", "record_dir": str(records), **args},
        _no_commands,
    )


def admin(proxy):
    return {s["name"]: s["admin"] for s in _haproxy.parse_servers_state(proxy.ask("show servers state"))}


def start(proxy, records):
    """What a start of haproxy.service does: the drop-in's ExecStartPre lines, then HAProxy."""
    state = proxy.folder / "server-state"
    state.unlink(missing_ok=True)
    argv = ["--start", "--records", str(records), "--config", str(proxy.config), "--out", str(state)]
    assert save_state.main(argv) == 0
    return proxy.start()


def reload_save(proxy, records):
    """What a reload runs before its signal: the running process's state saved with the held servers on top."""
    argv = ["--socket", proxy.socket, "--records", str(records), "--config", str(proxy.config)]
    assert save_state.main([*argv, "--out", str(proxy.folder / "server-state")]) == 0


@pytest.fixture
def proxy(tmp_path):
    live = LiveHAProxy(tmp_path)
    yield live
    live.stop()


def test_the_drop_in_writes_the_held_servers_at_every_start_and_reload():
    dropin = render(template="gb10-server-state.conf.j2")
    starts = re.findall(r"^ExecStartPre=(.*)$", dropin, re.M)
    assert starts[0] == "-/bin/rm -f /var/lib/haproxy/server-state"
    assert starts[1].startswith(
        "-/usr/local/libexec/gb10/haproxy-save-state --start --records /var/lib/gb10/proxy-admin "
    )
    reloads = re.findall(r"^ExecReload=(.*)$", dropin, re.M)
    assert reloads[0] == "" and reloads[-1] == "/bin/kill -USR2 $MAINPID"
    assert "--records /var/lib/gb10/proxy-admin" in reloads[2] and "--socket /run/haproxy/admin.sock" in reloads[2]


@NEEDS_HAPROXY
def test_the_rendered_configuration_passes_haproxy_check(proxy):
    done = proxy.check()
    assert done.returncode == 0, done.stdout + done.stderr


@NEEDS_HAPROXY
def test_pitfall_restart_forgets_a_drained_replica(proxy, tmp_path):
    # Issue 19: the drop-in's `ExecStartPre=-/bin/rm -f` removed the saved state, so a replica left drained by a
    # failed rolling upgrade or tool-calling gate came back into service after a proxy restart or reboot. The drain
    # is recorded on the proxy's node; a start puts it in the state file HAProxy loads before it takes traffic.
    records = tmp_path / "records"
    start(proxy, records)
    assert admin(proxy) == {"spark-1": "ready", "spark-2": "ready"}
    drained = module(proxy, records, name="spark-2", state="drain", reason="rolling upgrade failed at the gate")
    assert drained["changed"] and drained["record"] == "written"
    assert json.loads((records / "vllm" / "spark-2").read_text())["state"] == "drain"
    proxy.stop()  # a restart, a reboot, a crash that systemd's Restart=always follows
    start(proxy, records)
    assert admin(proxy) == {"spark-1": "ready", "spark-2": "drain"}
    read = module(proxy, records)
    held = {s["name"]: (s["held"], s["reason"]) for s in read["servers"]}
    assert held == {"spark-1": (None, None), "spark-2": ("drain", "rolling upgrade failed at the gate")}
    # a ready (the upgrade's, playbooks/ready.yml's) releases it, and the next start keeps it released
    released = module(proxy, records, name="spark-2", state="ready")
    assert released["changed"] and released["record"] == "removed" and not (records / "vllm" / "spark-2").exists()
    assert admin(proxy)["spark-2"] == "ready"
    proxy.stop()
    start(proxy, records)
    assert admin(proxy) == {"spark-1": "ready", "spark-2": "ready"}


@NEEDS_HAPROXY
def test_a_reload_keeps_a_held_server_out_even_if_the_runtime_readied_it(proxy, tmp_path):
    # The record is what holds: a `set server ... state ready` typed on the socket is undone by the next reload.
    records = tmp_path / "records"
    start(proxy, records)
    module(proxy, records, name="spark-1", state="maint", reason="operator")
    assert proxy.ask("set server vllm/spark-1 state ready").strip() == ""
    module(proxy, records, name="spark-2", state="drain")  # runtime and record
    reload_save(proxy, records)
    proxy.stop()
    proxy.start()  # the new process loads the file the reload wrote
    assert admin(proxy) == {"spark-1": "maint", "spark-2": "drain"}


@NEEDS_HAPROXY
def test_check_mode_reports_the_drain_and_changes_nothing(proxy, tmp_path):
    records = tmp_path / "records"
    start(proxy, records)
    result = module(proxy, records, name="spark-2", state="drain", _ansible_check_mode=True)
    assert result["changed"] and result["record"] == "written"
    assert admin(proxy)["spark-2"] == "ready" and not records.exists()
    module(proxy, records, name="spark-2", state="drain")
    again = module(proxy, records, name="spark-2", state="drain")
    assert not again["changed"] and again["record"] == "kept"


def test_a_start_writes_only_the_held_servers_of_the_configuration(tmp_path):
    records = tmp_path / "records"
    (records / "vllm").mkdir(parents=True)
    (records / "vllm" / "spark-2").write_text(_haproxy.record_text("vllm", "spark-2", "drain", "r", 1))
    (records / "vllm" / "spark-9").write_text(_haproxy.record_text("vllm", "spark-9", "maint", "gone", 1))
    (records / "vllm" / "junk").write_text("{")
    (records / "vllm" / ".tmp123").write_text("{")
    held, warnings = save_state.read_records(str(records))
    assert held == {("vllm", "spark-2"): "drain", ("vllm", "spark-9"): "maint"}
    assert len(warnings) == 1 and "junk" in warnings[0]
    text = save_state.keep_state("", save_state._config_servers(render((12, 8))), held)
    lines = text.splitlines()
    assert lines[0] == "1" and lines[1].startswith("# be_id be_name srv_id srv_name srv_addr")
    # spark-9 is no server of this configuration: nothing is written for it (its record stays for its return)
    assert lines[2:] == ["0 vllm 0 spark-2 192.168.200.12 2 8 1 1 0 1 0 1 6 0 0 0 - 8000 -"]


def test_the_saver_is_the_file_the_role_installs():
    assert (ROLE / "files" / "gb10-haproxy-save-state").read_text().startswith("#!/usr/bin/python3\n")
