# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The floating proxy address: which node advertises to which, at what priority, and every reason to refuse.

Pure functions over plain data; ``plugins/action/proxy_vip_plan.py`` hands them the inventory's figures and
``roles/proxy_vip`` renders keepalived.conf from the result. One VRRP instance: every proxy node starts as
BACKUP, adverts go unicast between the nodes' fabric addresses (no multicast needed on the fabric), and the
floating address lives on the interface clients reach the nodes on.
"""

from __future__ import annotations

import ipaddress

# Addresses HAProxy binds that also cover an address added later by keepalived. A bind to one concrete address
# could not take the floating address on a backup without net.ipv4.ip_nonlocal_bind (read-only in a container).
WILDCARD_BINDS = ("*", "", "0.0.0.0", "::", "[::]")
# VRRP priority 255 belongs to an address owner (RFC 5798 5.2.4); the floating address is owned by no node.
PRIORITY_RANGE = (1, 254)
DEFAULT_TOP_PRIORITY = 150
PRIORITY_STEP = 10


def _violation(node, rule, message):
    return {"node": node, "rule": rule, "message": message}


def _interface_network(cidr):
    try:
        return ipaddress.ip_interface(str(cidr))
    except ValueError:
        return None


def default_priorities(hosts):
    """{host: priority}: the group's first host highest, ``PRIORITY_STEP`` apart, never below 1."""
    return {
        host: max(PRIORITY_RANGE[0], DEFAULT_TOP_PRIORITY - PRIORITY_STEP * index) for index, host in enumerate(hosts)
    }


def check_address(address, prefix):
    """(ip_interface or None, [problem texts]) for the floating address and its prefix length."""
    problems = []
    try:
        prefix = int(prefix)
    except (TypeError, ValueError):
        return None, [f"proxy_vip_prefix is {prefix!r}, not a prefix length; set it to the subnet's, e.g. 24"]
    try:
        ip = ipaddress.ip_address(str(address).strip())
    except ValueError:
        return None, [f"proxy_vip_address is {address!r}, not an IP address; set one free address of the subnet"]
    if ip.version != 4:
        problems.append(f"proxy_vip_address {ip} is IPv6; this role configures VRRP for IPv4 only")
        return None, problems
    if not 1 <= prefix <= 32:
        return None, [f"proxy_vip_prefix is {prefix}; an IPv4 prefix length is 1..32 (the subnet's, e.g. 24)"]
    vip = ipaddress.ip_interface(f"{ip}/{prefix}")
    if prefix < 31 and ip in (vip.network.network_address, vip.network.broadcast_address):
        problems.append(
            f"proxy_vip_address {ip} is the {'network' if ip == vip.network.network_address else 'broadcast'} "
            f"address of {vip.network}; pick a free host address in it"
        )
    return vip, problems


def plan(
    address,
    prefix,
    hosts,
    nodes,
    virtual_router_id=51,
    advert_int=1,
    bind_address="*",
    other_addresses=None,
):
    """The floating address plan.

    ``hosts``: the proxy group in inventory order. ``nodes``: {host: {fabric_address, fabric_interface,
    vip_interface, interfaces: {name: "a.b.c.d/p"}, priority (0 or None: from the group's order)}}.
    ``other_addresses``: {host: address} of every inventory node, so the floating address is none of them.
    Returns {address, prefix, virtual_router_id, advert_int, nodes: {host: {unicast_src_ip, unicast_peers,
    priority, interface, vip_interface}}, violations: [{node, rule, message}]}: every violation at once.
    """
    hosts = list(hosts or [])
    nodes = nodes or {}
    violations = []
    vip, problems = check_address(address, prefix)
    violations.extend(_violation("all", "address", p) for p in problems)

    if len(hosts) < 2:
        violations.append(
            _violation(
                "all",
                "peers",
                f"a floating address needs the proxy on two nodes or more; group gb10_proxy has {len(hosts)} "
                f"({', '.join(hosts) or 'none'}): add the other nodes to gb10_proxy, or unset proxy_vip_address",
            )
        )

    try:
        vrid = int(virtual_router_id)
    except (TypeError, ValueError):
        vrid = 0
    if not 1 <= vrid <= 255:
        violations.append(
            _violation(
                "all",
                "virtual_router_id",
                f"proxy_vip_virtual_router_id is {virtual_router_id!r}; VRRP needs 1..255, unique among the "
                "VRRP routers of this network",
            )
        )
    try:
        advert = float(advert_int)
    except (TypeError, ValueError):
        advert = 0.0
    if not 0 < advert <= 255:
        violations.append(
            _violation(
                "all",
                "advert_int",
                f"proxy_vip_advert_int is {advert_int!r}; seconds between adverts, more than 0 and at most 255",
            )
        )

    if str(bind_address).strip() not in WILDCARD_BINDS:
        violations.append(
            _violation(
                "all",
                "bind",
                f"proxy_bind_address is {bind_address}: HAProxy on a backup node could not accept connections on "
                "the floating address when it arrives (binding an address a node does not hold needs "
                "net.ipv4.ip_nonlocal_bind); set proxy_bind_address: '*'",
            )
        )

    derived = default_priorities(hosts)
    sources = {}
    priorities = {}
    for host in hosts:
        node = nodes.get(host) or {}
        source = node.get("fabric_address")
        if not source or _interface_network(source) is None:
            violations.append(
                _violation(
                    host,
                    "unicast_src",
                    f"gb10_fabric_address is {source!r}; VRRP adverts go unicast between the proxies' fabric "
                    "addresses: set gb10_fabric_address for this node",
                )
            )
        else:
            sources[host] = str(_interface_network(source).ip)
        wanted = node.get("priority")
        priority = int(wanted) if wanted not in (None, "", 0, "0") else derived[host]
        if not PRIORITY_RANGE[0] <= priority <= PRIORITY_RANGE[1]:
            violations.append(
                _violation(
                    host,
                    "priority",
                    f"proxy_vip_priority is {priority}; a node that does not own the address takes "
                    f"{PRIORITY_RANGE[0]}..{PRIORITY_RANGE[1]}",
                )
            )
        priorities[host] = priority
        violations.extend(_interface_violations(host, node, vip))

    seen = {}
    for host, source in sources.items():
        if source in seen:
            violations.append(
                _violation(
                    host, "unicast_src", f"fabric address {source} is also {seen[source]}'s; each node needs its own"
                )
            )
        seen.setdefault(source, host)

    if vip is not None:
        owners = {**(other_addresses or {}), **sources}
        named = {v["node"] for v in violations if v["rule"] == "address"}
        for host, owned in sorted(owners.items()):
            parsed = _interface_network(owned) if owned else None
            if parsed is not None and parsed.ip == vip.ip and host not in named:
                violations.append(
                    _violation(
                        host,
                        "address",
                        f"proxy_vip_address {vip.ip} is this node's own address; the floating address must be "
                        "one no node holds by itself",
                    )
                )

    planned_nodes = {}
    for host in hosts:
        node = nodes.get(host) or {}
        planned_nodes[host] = {
            "unicast_src_ip": sources.get(host),
            "unicast_peers": [sources[peer] for peer in hosts if peer != host and peer in sources],
            "priority": priorities.get(host),
            "interface": node.get("fabric_interface"),
            "vip_interface": node.get("vip_interface") or node.get("fabric_interface"),
        }
    return {
        "address": str(vip.ip) if vip is not None else None,
        "prefix": vip.network.prefixlen if vip is not None else None,
        "virtual_router_id": vrid,
        "advert_int": advert_int,
        "nodes": planned_nodes,
        "violations": violations,
    }


def _interface_violations(host, node, vip):
    """The floating address must land on an interface the node has, in that interface's own subnet."""
    found = []
    fabric_interface = node.get("fabric_interface")
    vip_interface = node.get("vip_interface") or fabric_interface
    if not fabric_interface:
        found.append(
            _violation(host, "interface", "gb10_fabric_interface is unset; VRRP adverts leave on the fabric interface")
        )
    interfaces = node.get("interfaces") or {}
    if not vip_interface or vip is None:
        return found
    if vip_interface not in interfaces:
        found.append(
            _violation(
                host,
                "vip_interface",
                f"proxy_vip_interface {vip_interface} is not among this node's interfaces with an IPv4 address "
                f"({', '.join(sorted(interfaces)) or 'none known'}); name the interface clients reach the node on, "
                "or state it in gb10_stated_facts.interfaces",
            )
        )
        return found
    local = _interface_network(interfaces[vip_interface])
    if local is None:
        found.append(
            _violation(
                host, "vip_interface", f"{vip_interface} has address {interfaces[vip_interface]!r}, not a.b.c.d/p"
            )
        )
    elif vip.ip == local.ip:
        found.append(
            _violation(
                host,
                "address",
                f"proxy_vip_address {vip.ip} is this node's own address on {vip_interface}; the floating address "
                "must be one no node holds by itself",
            )
        )
    elif vip.ip not in local.network:
        found.append(
            _violation(
                host,
                "vip_subnet",
                f"proxy_vip_address {vip.ip} is outside {vip_interface}'s subnet {local.network} ({local}); clients "
                "on that subnet could not reach it: pick a free address of that subnet",
            )
        )
    elif local.network.prefixlen != vip.network.prefixlen:
        found.append(
            _violation(
                host,
                "vip_subnet",
                f"proxy_vip_prefix is {vip.network.prefixlen} but {vip_interface} is {local}; set proxy_vip_prefix: "
                f"{local.network.prefixlen}",
            )
        )
    return found


def format_violations(violations):
    lines = [f"{len(violations)} violation(s) of the floating proxy address; nothing was changed:"]
    lines.extend(f"- [{v['node']}] {v['rule']}: {v['message']}" for v in violations)
    return "\n".join(lines)
