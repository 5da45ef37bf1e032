# Copyright: gb10.serving maintainers
# Apache-2.0
"""The fabric firewall's table (issue 18 item 1, issue 37 item 1), rendered by Ansible's own templating from a real
plan's exposure table (``gb10_plan.exposure``): each of the collection's ports on the node accepted from the hosts the
plan names only, refused from elsewhere (the proxy's client port never fenced), the tensor-parallel group's ports for
either launcher, only the collection's tables touched (inet gb10_fabric, and inet gb10_ray, the name releases before
the mp launcher used, deleted); a plan without the table leaves a file that only removes them. `nft -c` checks it
where nft can (root with NET_ADMIN)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLE = Path(__file__).resolve().parents[4] / "roles" / "fabric_firewall"
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "_plan"))
from _plan_fixtures import DELETE, replicas, run, shipped_plan, site, tp

# every table the file touches: the old name, declared and deleted (a no-op once gone), then the table itself
TABLES = [
    "table inet gb10_ray",
    "delete table inet gb10_ray",
    "table inet gb10_fabric",
    "delete table inet gb10_fabric",
]


def _render(plan, host="spark-a", **overrides):
    role_vars = {
        **yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()),
        **yaml.safe_load((ROLE / "vars" / "main.yml").read_text()),
    }
    variables = {
        **{k: trust_as_template(v) if isinstance(v, str) else v for k, v in role_vars.items()},
        "gb10_plan": plan,
        "inventory_hostname": host,
        "ansible_managed": "managed",
        **overrides,
    }
    templar = Templar(loader=DataLoader(), variables=variables)
    source = (ROLE / "templates" / "fabric-firewall.nft.j2").read_text()
    return templar.template(trust_as_template(source))


def _nft_check(text, tmp_path):
    nft = shutil.which("nft") or "/usr/sbin/nft"
    if os.geteuid() != 0 or not os.path.exists(nft):
        return None
    path = tmp_path / "t.nft"
    path.write_text(text)
    done = subprocess.run([nft, "-c", "-f", str(path)], capture_output=True, text=True, check=False)
    if "Operation not permitted" in done.stderr:
        return None
    assert done.returncode == 0, done.stderr
    return True


def _mp(**changes):
    """TP_PROFILE on vLLM's own multi-node launch."""
    return tp(launcher="mp", **{"vllm_options__distributed-executor-backend": DELETE}, **changes)


def _lines(text):
    return [line.strip() for line in text.splitlines()]


def _chain(lines):
    return lines[lines.index("ct state established,related accept") :]


A, B = "192.168.200.11", "192.168.200.12"


def test_pitfall_invocations_answers_anyone_who_reaches_a_replica_port(tmp_path):
    """Replicas on the pair (both proxies, spark-a monitors): every listener of the collection on the node let in
    from the hosts that need it only, the client port not fenced, and nothing else of the host's touched."""
    plan = run(replicas())
    assert plan["violations"] == []
    text = _render(plan)
    lines = _lines(text)
    # one atomic replacement of its own table, never the host's ruleset; the old table's name is deleted first
    assert lines[lines.index("table inet gb10_ray") :][:4] == TABLES
    assert lines.index("delete table inet gb10_fabric") < lines.index("table inet gb10_fabric {")
    assert "flush ruleset" not in text and "table ip filter" not in text
    assert "elements = { 8000, 8009, 8405, 9090, 9100, 18741, 18761 }" in lines  # not 8080, the client port
    chain = _chain(lines)
    assert chain[0] == "ct state established,related accept" and chain[2] == 'iifname "lo" accept'
    accepts = [line for line in chain if line.endswith(" accept") and "saddr" in line]
    assert accepts == [
        f"ip saddr {{ {A}, {B} }} tcp dport {{ 8000 }} accept",
        f"ip saddr {{ {A}, {B} }} tcp dport {{ 8009 }} accept",
        f"ip saddr {{ {A} }} tcp dport {{ 8405 }} accept",
        f"ip saddr {{ {A} }} tcp dport {{ 9100 }} accept",
        f"ip saddr {{ {A}, {B} }} tcp dport {{ 18741 }} accept",
        f"ip saddr {{ {A}, {B} }} tcp dport {{ 18761 }} accept",
    ]
    assert "# prometheus: this node only" in chain  # no accept: loopback (the node itself) only
    assert chain[-3:] == ["tcp dport @fenced_ports reject with tcp reset", "}", "}"]
    assert "policy accept;" in text  # every other port is the host's business
    _nft_check(text, tmp_path)


def test_tensor_parallel_table_lets_ray_in_from_the_peers_only(tmp_path):
    plan = run(tp())
    assert plan["violations"] == [] and plan["fence"]["launcher"] == "ray"
    lines = _lines(_render(plan))
    assert (
        "elements = { 8000, 8009, 8405, 9090, 9100, 18741, 18761, 6379, 6380, 6381, 6382, 6383, 6384, "
        "10001, 52365, 10002-10999 }" in lines
    )
    assert (
        f"ip saddr {{ {A}, {B} }} tcp dport {{ 6379, 6380, 6381, 6382, 6383, 6384, 10001, 52365, 10002-10999 }} accept"
        in lines
    )
    worker = _lines(_render(plan, host="spark-b"))
    assert not any("8000" in line for line in worker)  # a Ray worker serves no port
    assert f"ip saddr {{ {A}, {B} }} tcp dport {{ 6380, 6381, 6382, 6383, 6384, 52365, 10002-10999 }} accept" in worker
    _nft_check(_render(plan), tmp_path)


def test_mp_table_lets_the_master_port_and_the_ephemeral_range_in_from_the_peers_only(tmp_path):
    # vLLM's own multi-node launch (sim-tp): torch.distributed's store on the head's master port, and every other
    # socket of the group (gloo, NCCL, vLLM's message queues) on a port the kernel picks from its ephemeral range
    plan = shipped_plan("sim", "sim-tp")
    assert plan["violations"] == [] and plan["launcher"] == "mp" and plan["ray"] is None
    assert plan["fence"]["launcher"] == "mp" and plan["fence"]["firewall"] is True
    text = _render(plan, host="spark-1")
    lines = _lines(text)
    assert lines[lines.index("table inet gb10_ray") :][:4] == TABLES
    assert "ip saddr { 10.77.0.11, 10.77.0.12 } tcp dport { 29501, 32768-60999 } accept" in lines
    # the simulation opens a replica's port to its controller (the gateway), on purpose (inventories/sim)
    assert "ip saddr { 10.77.0.11, 10.77.0.12, 10.77.0.128 } tcp dport { 8000 } accept" in lines
    rank = _lines(_render(plan, host="spark-2"))
    assert "ip saddr { 10.77.0.11, 10.77.0.12 } tcp dport { 32768-60999 } accept" in rank
    assert "6379" not in text and "policy accept;" in text
    _nft_check(text, tmp_path)


def test_mp_table_follows_the_profiles_master_port_and_range(tmp_path):
    plan = run(_mp(mp={"master_port": 23456, "ephemeral_ports": [40000, 50000]}))
    assert plan["violations"] == []
    text = _render(plan)
    assert f"ip saddr {{ {A}, {B} }} tcp dport {{ 23456, 40000-50000 }} accept" in _lines(text)
    _nft_check(text, tmp_path)


def test_drop_verdict_ipv6_sources_and_an_opened_subnet_merged(tmp_path):
    opened = [
        {"service": "replica", "from": ["192.168.200.0/24", "fd00::/64"], "why": "the lab's clients"},
        {"service": "prometheus", "from": ["fd00::12"], "why": "Grafana"},
    ]
    plan = run(replicas(), site=site(opened=opened))
    assert plan["violations"] == []
    text = _render(plan, fabric_firewall_verdict="drop")
    lines = _lines(text)
    # the nodes' own addresses lie in the opened subnet: one interval, never a conflicting one
    assert "ip saddr { 192.168.200.0/24 } tcp dport { 8000 } accept" in lines
    assert "ip6 saddr { fd00::/64 } tcp dport { 8000 } accept" in lines
    assert "ip6 saddr { fd00::12 } tcp dport { 9090 } accept" in lines
    assert "tcp dport @fenced_ports drop" in lines and "reject" not in text.split("chain input")[1]
    _nft_check(text, tmp_path)


def test_without_an_exposure_table_the_file_only_removes_the_table(tmp_path):
    # (roles/fabric_firewall's preflight refuses such a plan before the file is written; a node outside the plan
    # gets the same file)
    plan = run(replicas(), site=None)
    assert plan["violations"] == [] and plan["exposure"] is None
    text = _render(plan)
    body = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert body == TABLES
    _nft_check(text, tmp_path)
