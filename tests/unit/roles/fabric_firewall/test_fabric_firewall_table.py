# Copyright: gb10.serving maintainers
# Apache-2.0
"""The fabric firewall's table (issue 18 item 1), rendered by Ansible's own templating from a real plan: Ray's
ports accepted from the group's fabric addresses only, refused from elsewhere, only the table inet gb10_ray
touched; in replicas the file only removes that table. `nft -c` checks it where nft can (root with NET_ADMIN)."""

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
from _plan_fixtures import replicas, run, tp


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


def test_tensor_parallel_table_lets_ray_in_from_the_peers_only(tmp_path):
    text = _render(run(tp()))
    lines = [line.strip() for line in text.splitlines()]
    # one atomic replacement of its own table, never the host's ruleset
    assert lines.index("table inet gb10_ray") < lines.index("delete table inet gb10_ray")
    assert "flush ruleset" not in text and "table ip filter" not in text
    assert "elements = { 192.168.200.11, 192.168.200.12 }" in lines
    assert "elements = { 6379, 6380, 6381, 6382, 6383, 6384, 10001, 52365, 10002-10999 }" in lines
    chain = lines[lines.index("ct state established,related accept") :]
    assert chain[:4] == [
        "ct state established,related accept",
        'iifname "lo" accept',
        "ip saddr @peers4 tcp dport @ray_ports accept",
        "tcp dport @ray_ports reject with tcp reset",
    ]
    assert "policy accept;" in text  # every other port is the host's business
    _nft_check(text, tmp_path)


def test_drop_verdict_and_ipv6_peers(tmp_path):
    plan = run(tp())
    plan["ray"]["peers"] = ["192.168.200.11", "fd00::12"]
    text = _render(plan, fabric_firewall_verdict="drop")
    assert "ip6 saddr @peers6 tcp dport @ray_ports accept" in text and "elements = { fd00::12 }" in text
    assert "tcp dport @ray_ports drop" in text and "reject" not in text.split("chain input")[1]
    _nft_check(text, tmp_path)


@pytest.mark.parametrize("plan", [run(replicas()), run(tp(ray={"firewall": False}))], ids=["replicas", "no-firewall"])
def test_without_the_fence_the_file_only_removes_the_table(plan, tmp_path):
    text = _render(plan)
    body = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert body == ["table inet gb10_ray", "delete table inet gb10_ray"]
    _nft_check(text, tmp_path)
