# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Who may reach what (issue 37 item 1): every port the collection listens on, per node, and the hosts that need it.

vLLM guards only ``/v1`` with its API key: ``/invocations`` generates, ``/tokenize``, ``/metrics`` and ``/version``
answer anyone who reaches a replica's port (measured on vLLM 0.32, issue 37). So every listening port of the
collection is let in only from the hosts the plan says need it, by roles/fabric_firewall, which renders this table
and nothing else; ``format_plan`` prints it and the README's table is ``markdown_rows()`` (one source).

``site`` is what the serving_plan action reads from the inventory (``plugins/action/serving_plan.py``):
``{"proxies": [host], "monitoring": [host] (empty when monitoring is off), "addresses": {host: fabric address},
"ports": {host: {service: port}} (0: that listener is off), "open": [{"service", "from": [address or CIDR], "why"}]}``.
"""

from __future__ import annotations

import ipaddress
from collections import namedtuple

# One listener of the collection: where it runs and who needs it. ``port`` names the variable that sets it.
Service = namedtuple("Service", "name variable runs_on reached_by fenced")

SERVICES = (
    Service(
        "replica",
        "the profile's port",
        "each node that serves (a replica, a tensor-parallel head)",
        "the proxy nodes (requests, health checks), the monitoring nodes (scrape), the site's nodes (the rolling "
        "upgrade's gate compares with a running replica; a tensor-parallel rank's watchdog asks its head)",
        True,
    ),
    Service("warm_agent", "gb10_warm_agent_port", "each node that serves", "the proxy nodes (agent check)", True),
    Service("proxy_client", "gb10_proxy_port", "the proxy nodes", "anyone (TLS and the API key guard it)", False),
    Service("proxy_metrics", "gb10_proxy_metrics_port", "the proxy nodes", "the monitoring nodes (scrape)", True),
    Service("prometheus", "monitoring_prometheus_port", "the monitoring nodes", "nobody but the node itself", True),
    Service(
        "node_exporter", "monitoring_node_exporter_port", "every node (monitoring on)", "the monitoring nodes", True
    ),
    Service(
        "weights_fanout", "model_weights_fanout_port", "every node (while it sends weights)", "the site's nodes", True
    ),
    Service(
        "flashinfer_share",
        "flashinfer_jit_share_port",
        "every node (while it sends its cache)",
        "the site's nodes",
        True,
    ),
    Service(
        "tp_group",
        "the profile's ray.ports, or mp.master_port and mp.ephemeral_ports",
        "a tensor-parallel group's ranks (its firewall on)",
        "the group's ranks",
        True,
    ),
)
BY_NAME = {service.name: service for service in SERVICES}
# What an opening may name: a fenced service (the client port is open already).
OPENABLE = tuple(service.name for service in SERVICES if service.fenced)


def markdown_rows():
    """The README's table of who may reach what, one row per service (tests/unit: the README holds these rows)."""
    rows = ["| service | port | runs on | reached only by |", "| --- | --- | --- | --- |"]
    for service in SERVICES:
        rows.append(f"| `{service.name}` | {_code(service.variable)} | {service.runs_on} | {service.reached_by} |")
    return rows


def _code(variable):
    return f"`{variable}`" if " " not in variable else variable


def opening_problems(site):
    """Why each of ``site['open']`` cannot be applied: ``[(index, value, why)]`` (empty when every one can)."""
    problems = []
    for index, opening in enumerate((site or {}).get("open") or []):
        if not isinstance(opening, dict):
            problems.append((index, opening, "is not a mapping of service, from and why"))
            continue
        service, sources, why = opening.get("service"), opening.get("from"), opening.get("why")
        if service not in OPENABLE:
            problems.append((index, service, f"service must be one of {', '.join(OPENABLE)}"))
        if not isinstance(sources, list) or not sources:
            problems.append((index, sources, "from must be a non-empty list of addresses or CIDRs"))
        else:
            for source in sources:
                if _network(source) is None:
                    problems.append((index, source, "is not an IPv4 or IPv6 address or CIDR"))
        if not isinstance(why, str) or not why.strip() or "\n" in why or "\r" in why:
            problems.append((index, why, "why must say, on one line, who needs it and why (the plan prints it)"))
    return problems


def _network(source):
    try:
        return ipaddress.ip_network(str(source), strict=False)
    except ValueError:
        return None


def missing_addresses(site, hosts):
    """The hosts the fence has to name (the plan's nodes, the proxies, the monitoring nodes) without an address."""
    site = site or {}
    wanted = list(hosts) + list(site.get("proxies") or []) + list(site.get("monitoring") or [])
    addresses = site.get("addresses") or {}
    return sorted({host for host in wanted if not addresses.get(host)})


def port_clashes(entries):
    """Two services of one node on one port (a single port, or one inside another's range): ``[(port, [name])]``."""
    owners = {}
    for entry in entries:
        for port in entry["ports"]:
            owners.setdefault(port, set()).add(entry["service"])
    for entry in entries:
        for low, high in entry["ranges"]:
            for port, names in owners.items():
                if low <= port <= high:
                    names.add(entry["service"])
    return sorted((port, sorted(names)) for port, names in owners.items() if len(names) > 1)


def _entry(site, name, single=(), ranges=(), reached=()):
    """One listener's entry (None when it has no port): its ports, who may reach it, the openings that widen it."""
    single = [int(p) for p in single if p]
    if not single and not ranges:
        return None
    openings = [o for o in site.get("open") or [] if isinstance(o, dict) and o.get("service") == name]
    sources = sorted({str(a) for a in reached} | {str(a) for o in openings for a in o.get("from") or []})
    return {
        "service": name,
        "ports": single,
        "ranges": [[int(low), int(high)] for low, high in ranges],
        "from": sources,
        # the same sources as nftables takes them: per family, overlaps merged (an address inside an opened
        # subnet would otherwise be a conflicting interval of the rule's set)
        "nets4": _collapsed(sources, 4),
        "nets6": _collapsed(sources, 6),
        "fenced": BY_NAME[name].fenced,
        "opened": [{"from": [str(a) for a in o.get("from") or []], "why": o.get("why")} for o in openings],
    }


def _collapsed(sources, version):
    networks = [n for n in (_network(s) for s in sources) if n is not None and n.version == version]
    return [
        str(n.network_address) if n.prefixlen == n.max_prefixlen else str(n)
        for n in ipaddress.collapse_addresses(networks)
    ]


def node_exposure(site, hosts, serving, fence):
    """``{host: [entry]}``: each listener of the collection on each of ``hosts`` and who may reach it.

    serving: ``{host: replica port}`` of the nodes that serve; fence: the tensor-parallel group's fence
    (``context.fabric_fence``, None in replicas). An entry is ``{"service", "ports": [port], "ranges": [[low,
    high]], "from": [address or CIDR] (sorted, the openings' sources included), "fenced", "opened": [{"from",
    "why"}]}``; a listener whose port is 0 is left out.
    """
    site = site or {}
    addresses = {host: str(address) for host, address in (site.get("addresses") or {}).items() if address}
    proxies = [addresses[h] for h in site.get("proxies") or [] if h in addresses]
    monitors = [addresses[h] for h in site.get("monitoring") or [] if h in addresses]
    nodes = [addresses[h] for h in hosts if h in addresses]
    ranks = list((fence or {}).get("peers") or [])
    exposure = {}
    for host in hosts:
        ports = (site.get("ports") or {}).get(host) or {}
        wanted = []
        if host in serving:
            wanted.append(("replica", [serving[host]], (), proxies + monitors + nodes + ranks))
            wanted.append(("warm_agent", [ports.get("warm_agent")], (), proxies))
        if host in (site.get("proxies") or []):
            wanted.append(("proxy_client", [ports.get("proxy_client")], (), ()))
            wanted.append(("proxy_metrics", [ports.get("proxy_metrics")], (), monitors))
        if site.get("monitoring"):
            if host in site["monitoring"]:
                wanted.append(("prometheus", [ports.get("prometheus")], (), ()))
            wanted.append(("node_exporter", [ports.get("node_exporter")], (), monitors))
        wanted.append(("weights_fanout", [ports.get("weights_fanout")], (), nodes))
        wanted.append(("flashinfer_share", [ports.get("flashinfer_share")], (), nodes))
        if fence and fence.get("firewall"):
            wanted.append(("tp_group", (fence.get("listen") or {}).get(host) or [], fence.get("ranges") or [], ranks))
        entries = [_entry(site, *want) for want in wanted]
        exposure[host] = [entry for entry in entries if entry is not None]
    return exposure


def format_exposure(exposure, address_names):
    """The plan's lines for the exposure table: per node, each port and who may reach it (hosts by name)."""
    lines = ["exposure (roles/fabric_firewall lets each port in only from these; everything else is refused):"]
    for host, entries in sorted(exposure.items()):
        lines.append(f"  {host}:")
        for entry in entries:
            where = ", ".join([str(p) for p in entry["ports"]] + [f"{lo}-{hi}" for lo, hi in entry["ranges"]])
            if not entry["fenced"]:
                lines.append(f"    {entry['service']:<17} {where:<18} anyone")
                continue
            who = ", ".join(address_names.get(source, source) for source in entry["from"]) or "this node only"
            lines.append(f"    {entry['service']:<17} {where:<18} {who}")
            lines.extend(f"      opened to {', '.join(o['from'])} on purpose: {o['why']}" for o in entry["opened"])
    return lines
