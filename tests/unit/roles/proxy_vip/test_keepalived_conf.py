# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/proxy_vip's keepalived.conf rendered from the plan: unicast peers, all BACKUP, HAProxy tracked."""

from __future__ import annotations

import re
from pathlib import Path

import jinja2
import yaml
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gb10.serving.plugins.module_utils._plan import proxy_vip as vip

ROLE = Path(__file__).resolve().parents[4] / "roles" / "proxy_vip"


def render(host="spark-1", vip_interface="eth0", **overrides):
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    nodes = {
        f"spark-{i}": {
            "fabric_address": f"10.93.0.1{i}",
            "fabric_interface": "eth0",
            "vip_interface": vip_interface,
            "interfaces": {"eth0": f"10.93.0.1{i}/24", "eth1": f"192.168.1.2{i}/24"},
        }
        for i in (1, 2)
    }
    address = "10.93.0.10" if vip_interface == "eth0" else "192.168.1.20"
    planned = vip.plan(address, 24, sorted(nodes), nodes)
    assert planned["violations"] == []
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(ROLE / "templates"), undefined=jinja2.StrictUndefined, trim_blocks=True
    )
    env.filters["bool"] = boolean  # Ansible's bool filter, as the role's template module has it
    return env.get_template("keepalived.conf.j2").render(
        ansible_managed="Ansible managed",
        inventory_hostname=host,
        __proxy_vip_plan={"plan": planned},
        **{**defaults, **role_vars, **overrides},
    )


def block(cfg, name):
    """The text between `name {` and its closing brace (one level of nesting)."""
    start = cfg.index(name + " {")
    depth, i = 0, start
    while True:
        if cfg[i] == "{":
            depth += 1
        elif cfg[i] == "}":
            depth -= 1
            if depth == 0:
                return cfg[start : i + 1]
        i += 1


def test_starts_with_ansible_managed():
    assert render().startswith("# Ansible managed")


def test_unicast_from_own_fabric_address_to_the_peers_only():
    cfg = render("spark-2")
    instance = block(cfg, "vrrp_instance gb10_proxy")
    assert re.search(r"^\s+unicast_src_ip 10\.93\.0\.12$", instance, re.M)
    assert re.findall(r"^\s+(10\.93\.0\.1\d)$", block(instance, "unicast_peer"), re.M) == ["10.93.0.11"]
    assert "check_unicast_src" in instance and "unicast_fault_no_peer" in instance
    assert re.search(r"^\s+interface eth0$", instance, re.M)
    assert re.search(r"^\s+priority 140$", instance, re.M)


def test_every_node_starts_backup_and_a_returning_node_does_not_take_the_address_back():
    # A returning node that preempted would cost clients a second failover window for nothing: every node runs
    # the same HAProxy in front of the same replicas.
    instance = block(render(), "vrrp_instance gb10_proxy")
    assert re.search(r"^\s+state BACKUP$", instance, re.M) and re.search(r"^\s+nopreempt$", instance, re.M)
    assert "nopreempt" not in render(proxy_vip_preempt=True)
    # -e proxy_vip_preempt=false arrives as text: still false (argument_specs type bool checks it, never converts it)
    assert re.search(r"^\s+nopreempt$", render(proxy_vip_preempt="false"), re.M)


def test_the_address_with_its_prefix_on_the_client_interface():
    instance = block(render(), "vrrp_instance gb10_proxy")
    assert re.search(r"^\s+10\.93\.0\.10/24 dev eth0$", block(instance, "virtual_ipaddress"), re.M)
    assert "track_interface" not in instance


def test_a_separate_client_interface_is_tracked():
    instance = block(render(vip_interface="eth1"), "vrrp_instance gb10_proxy")
    assert re.search(r"^\s+192\.168\.1\.20/24 dev eth1$", block(instance, "virtual_ipaddress"), re.M)
    assert re.search(r"^\s+eth1$", block(instance, "track_interface"), re.M)


def test_the_local_haproxy_is_tracked_by_an_unprivileged_check():
    cfg = render()
    script = block(cfg, "vrrp_script gb10_haproxy_answers")
    assert '"/usr/bin/curl --fail --silent --output /dev/null --max-time 2 http://127.0.0.1:8404/stats"' in script
    for line in ("interval 1", "timeout 2", "fall 2", "rise 2"):
        assert re.search(rf"^\s+{line}$", script, re.M)
    assert "gb10_haproxy_answers" in block(block(cfg, "vrrp_instance gb10_proxy"), "track_script")
    glob = block(cfg, "global_defs")
    assert "enable_script_security" in glob and "script_user keepalived_script" in glob


def _client(api, **given):
    """The floating-address check's URL and CA file (vars/main.yml) for a plan whose api is ``api``."""
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    values = {
        "gb10_plan": {"api": api},
        "gb10_proxy_tls_ca_file": "/etc/haproxy/gb10-tls-ca.pem",
        "__proxy_vip_plan": {"plan": {"address": "10.93.0.10"}},
        "gb10_proxy_port": 8080,
        **given,
    }
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    for name in ("_proxy_vip_api", "_proxy_vip_client_port", "_proxy_vip_client_url", "_proxy_vip_client_ca"):
        rendered = env.from_string(role_vars[name]).render(**values)
        values[name] = yaml.safe_load(rendered) if name == "_proxy_vip_api" else rendered
    return values["_proxy_vip_client_url"], values["_proxy_vip_client_ca"]


def test_the_floating_address_is_checked_as_a_client_would_with_its_certificate_verified():
    """The plan's client URL (https with a certificate) and the CA the proxy role put on the node; the system's store
    without proxy_tls_ca; plain HTTP at the address without TLS (no plan URL: the address itself). The task never
    turns verification off (tasks/service.yml: validate_certs true)."""
    tls = {"url": "https://10.93.0.10:8080", "ca": "/ctl/ca.pem", "tls": True}
    assert _client(tls) == ("https://10.93.0.10:8080", "/etc/haproxy/gb10-tls-ca.pem")
    assert _client({**tls, "ca": ""}) == ("https://10.93.0.10:8080", "")
    assert _client({"url": "http://10.93.0.10:8080", "ca": "", "tls": False}) == ("http://10.93.0.10:8080", "")
    assert _client(None) == ("http://10.93.0.10:8080", "")
    task = yaml.safe_load((ROLE / "tasks" / "service.yml").read_text())
    wait = next(t for t in task if t["name"] == "Wait until HAProxy answers on the floating address")
    assert wait["ansible.builtin.uri"]["validate_certs"] is True
