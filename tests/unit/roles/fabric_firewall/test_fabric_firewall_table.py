# Copyright: gb10.serving maintainers
# Apache-2.0
"""The fabric firewall's table (issue 18 item 1), rendered by Ansible's own templating from a real plan's fence
(``gb10_plan.fence``, either launcher): the group's ports accepted from the group's fabric addresses only, refused
from elsewhere, only the collection's tables touched (inet gb10_fabric, and inet gb10_ray, the name releases before
the mp launcher used, deleted); in replicas, or with the fence off, the file only removes those tables. `nft -c`
checks it where nft can (root with NET_ADMIN)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLE = Path(__file__).resolve().parents[4] / "roles" / "fabric_firewall"
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "_plan"))
from _plan_fixtures import DELETE, replicas, run, shipped_plan, tp

# every table the file touches: the old name, declared and deleted (a no-op once gone), then the table itself
TABLES = [
    "table inet gb10_ray",
    "delete table inet gb10_ray",
    "table inet gb10_fabric",
    "delete table inet gb10_fabric",
]


def _render(plan, **overrides):
    role_vars = {
        **yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()),
        **yaml.safe_load((ROLE / "vars" / "main.yml").read_text()),
    }
    variables = {
        **{k: trust_as_template(v) if isinstance(v, str) else v for k, v in role_vars.items()},
        "gb10_plan": plan,
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


def test_tensor_parallel_table_lets_ray_in_from_the_peers_only(tmp_path):
    plan = run(tp())
    assert plan["violations"] == [] and plan["fence"]["launcher"] == "ray"
    text = _render(plan)
    lines = _lines(text)
    # one atomic replacement of its own table, never the host's ruleset; the old table's name is deleted first
    assert lines[lines.index("table inet gb10_ray") :][:4] == TABLES
    assert lines.index("delete table inet gb10_fabric") < lines.index("table inet gb10_fabric {")
    assert "flush ruleset" not in text and "table ip filter" not in text
    assert "elements = { 192.168.200.11, 192.168.200.12 }" in lines
    assert "elements = { 6379, 6380, 6381, 6382, 6383, 6384, 10001, 52365, 10002-10999 }" in lines
    assert _chain(lines)[:4] == [
        "ct state established,related accept",
        'iifname "lo" accept',
        "ip saddr @peers4 tcp dport @group_ports accept",
        "tcp dport @group_ports reject with tcp reset",
    ]
    assert "set group_ports {" in lines and "flags interval" in lines
    assert "policy accept;" in text  # every other port is the host's business
    _nft_check(text, tmp_path)


def test_mp_table_lets_the_master_port_and_the_ephemeral_range_in_from_the_peers_only(tmp_path):
    # vLLM's own multi-node launch (sim-tp): torch.distributed's store on the head's master port, and every other
    # socket of the group (gloo, NCCL, vLLM's message queues) on a port the kernel picks from its ephemeral range
    plan = shipped_plan("sim", "sim-tp")
    assert plan["violations"] == [] and plan["launcher"] == "mp" and plan["ray"] is None
    assert plan["fence"]["launcher"] == "mp" and plan["fence"]["firewall"] is True
    text = _render(plan)
    lines = _lines(text)
    assert lines[lines.index("table inet gb10_ray") :][:4] == TABLES
    assert "elements = { 10.77.0.11, 10.77.0.12 }" in lines
    assert "elements = { 29501, 32768-60999 }" in lines
    assert _chain(lines)[:4] == [
        "ct state established,related accept",
        'iifname "lo" accept',
        "ip saddr @peers4 tcp dport @group_ports accept",
        "tcp dport @group_ports reject with tcp reset",
    ]
    assert "6379" not in text and "policy accept;" in text
    _nft_check(text, tmp_path)


def test_mp_table_follows_the_profiles_master_port_and_range(tmp_path):
    plan = run(_mp(mp={"master_port": 23456, "ephemeral_ports": [40000, 50000]}))
    assert plan["violations"] == []
    text = _render(plan)
    assert "elements = { 23456, 40000-50000 }" in _lines(text)
    assert "elements = { 192.168.200.11, 192.168.200.12 }" in _lines(text)
    _nft_check(text, tmp_path)


def test_drop_verdict_and_ipv6_peers(tmp_path):
    plan = run(tp())
    plan["fence"]["peers"] = ["192.168.200.11", "fd00::12"]
    text = _render(plan, fabric_firewall_verdict="drop")
    assert "ip6 saddr @peers6 tcp dport @group_ports accept" in text and "elements = { fd00::12 }" in text
    assert "tcp dport @group_ports drop" in text and "reject" not in text.split("chain input")[1]
    _nft_check(text, tmp_path)


@pytest.mark.parametrize(
    "plan",
    [run(replicas()), run(tp(ray={"firewall": False}))],
    ids=["replicas", "ray-no-firewall"],
)
def test_without_the_fence_the_file_only_removes_the_table(plan, tmp_path):
    # (mp.firewall: false is refused by the plan, mp_open: vLLM's launch has no other fence)
    assert plan["violations"] == []
    text = _render(plan)
    body = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert body == TABLES
    _nft_check(text, tmp_path)
