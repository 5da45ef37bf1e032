# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""What roles/monitoring's Prometheus scrapes, from the serving plan: pure functions, no Ansible.

Every replica on its own fabric address and port (seed 002: /metrics read through the proxy jumped between
replicas, so the summing is Prometheus's, over each replica's own counters), HAProxy's Prometheus endpoint on each
proxy node's fabric address, and every node's exporter. The entries are Prometheus file_sd target groups, the same
shape playbooks/status.yml writes (``_status.scrape_targets``).
"""

from __future__ import annotations

import ipaddress

from ansible_collections.gb10.serving.plugins.module_utils._status import scrape_targets

JOBS = ("vllm", "haproxy", "node")


def _address(addresses, host, why):
    address = str((addresses or {}).get(host) or "").strip()
    try:
        ipaddress.ip_address(address)
    except ValueError:
        raise ValueError(
            f"{host} has no usable gb10_fabric_address ({address!r}): Prometheus scrapes {why} on it. "
            f"Set gb10_fabric_address for {host} to its address on the fabric."
        ) from None
    # an IPv6 address in a target is bracketed (host:port)
    return f"[{address}]" if ":" in address else address


def _port(value, what):
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 65535:
        raise ValueError(f"{what} is {value!r}, not a port (1..65535, or 0 for none)")
    return value


def targets(plan, addresses, node_exporter_port, proxy_ports):
    """{"vllm": [...], "haproxy": [...], "node": [...]}: file_sd target groups, each labelled job and node.

    plan: the serving plan (``serving_hosts`` and ``nodes[host].port``); addresses: {host: gb10_fabric_address};
    node_exporter_port: the exporter's port on every node of the plan; proxy_ports: {proxy host: HAProxy's
    Prometheus port} (0: that proxy exposes none, so it is not scraped). Raises ValueError naming the host and fix.
    """
    plan = plan or {}
    nodes = plan.get("nodes") or {}
    replicas = [
        {
            "node": host,
            "address": _address(addresses, host, "its replica's /metrics"),
            "port": _port(nodes[host].get("port"), f"the plan's port of {host}"),
        }
        for host in plan.get("serving_hosts") or []
    ]
    proxies = [
        {"node": host, "address": _address(addresses, host, "HAProxy's /metrics"), "port": port}
        for host, port in sorted((proxy_ports or {}).items())
        if _port(port, f"gb10_proxy_metrics_port of {host}")
    ]
    exporter_port = _port(node_exporter_port, "monitoring_node_exporter_port")
    exporters = [
        {"node": host, "address": _address(addresses, host, "its node exporter"), "port": exporter_port}
        for host in sorted(nodes)
    ]
    return {
        "vllm": scrape_targets(replicas, "vllm"),
        "haproxy": scrape_targets(proxies, "haproxy"),
        "node": scrape_targets(exporters, "node"),
    }
