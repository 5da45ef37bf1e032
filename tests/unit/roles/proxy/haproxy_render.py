# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/proxy's haproxy.cfg.j2 rendered from a small serving plan, for the proxy role's unit tests."""

from __future__ import annotations

from pathlib import Path

import jinja2
import yaml

ROLE = Path(__file__).resolve().parents[4] / "roles" / "proxy"


def render(max_seqs=(12, 8)):
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    nodes = {f"spark-{i + 1}": {"port": 8000, "max_num_seqs": seqs} for i, seqs in enumerate(max_seqs)}
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(ROLE / "templates"), undefined=jinja2.StrictUndefined)
    return env.get_template("haproxy.cfg.j2").render(
        ansible_managed="Ansible managed",
        _proxy_plan={"profile": "pair", "nodes": nodes},
        _proxy_servers=sorted(nodes),
        _proxy_errorfile="/etc/haproxy/errors/gb10-503-queue.http",
        hostvars={host: {"gb10_fabric_address": f"192.168.200.{11 + i}"} for i, host in enumerate(sorted(nodes))},
        **defaults,
    )
