# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/proxy/files/gb10-haproxy-save-state: a reload keeps drain/maint set through the runtime API."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import re

from haproxy_render import ROLE, render

SCRIPT = ROLE / "files" / "gb10-haproxy-save-state"
_loader = importlib.machinery.SourceFileLoader("gb10_haproxy_save_state", str(SCRIPT))
_spec = importlib.util.spec_from_loader("gb10_haproxy_save_state", _loader)
save_state = importlib.util.module_from_spec(_spec)
_loader.exec_module(save_state)

HEADER = (
    "# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight "
    "srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state "
    "srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl srv_check_port "
    "srv_check_addr srv_agent_addr srv_agent_port"
)


def row(name, addr, admin=0, port=8000, srv_id=1):
    return f"3 vllm {srv_id} {name} {addr} 2 {admin} 1 1 12 15 3 1 6 0 0 0 - {port} - 0 0 - - 0"


def state(*rows):
    return "1\n" + HEADER + "\n" + "\n".join(rows) + "\n"


def test_pitfall_reload_forgets_a_drained_replica():
    # A rolling upgrade that failed leaves spark-2 drained (admin state 8, FDRAIN); a later reload of HAProxy
    # must not put it back in service: its row is saved for the next process.
    cfg = render((12, 8))
    servers = save_state.config_servers(cfg)
    assert servers == {("vllm", "spark-1"): ("192.168.200.11", "8000"), ("vllm", "spark-2"): ("192.168.200.12", "8000")}
    text = state(row("spark-1", "192.168.200.11"), row("spark-2", "192.168.200.12", admin=8, srv_id=2))
    kept = save_state.keep_state(text, servers)
    assert kept.splitlines()[0] == "1" and kept.splitlines()[1] == HEADER
    assert re.search(r"^3 vllm 2 spark-2 192\.168\.200\.12 2 8 ", kept, re.M)


def test_a_server_whose_address_or_port_changed_starts_from_the_configuration():
    # HAProxy applies the file's address and port over the configuration's (haproxy#1412, #3296): leave it out.
    servers = {("vllm", "spark-1"): ("10.0.0.11", "8000"), ("vllm", "spark-2"): ("192.168.200.12", "8001")}
    text = state(row("spark-1", "192.168.200.11"), row("spark-2", "192.168.200.12", admin=8, srv_id=2))
    assert save_state.keep_state(text, servers) == "1\n" + HEADER + "\n"


def test_the_template_loads_the_state_file():
    cfg = render()
    assert re.search(r"^\s+server-state-file /var/lib/haproxy/server-state$", cfg, re.M)
    assert re.search(r"^\s+load-server-state-from-file global$", cfg, re.M)
