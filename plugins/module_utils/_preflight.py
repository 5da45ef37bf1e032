"""The node preflight's verdict: every role's problems on every node, and the fabric address against the node's own."""

from __future__ import annotations

import ipaddress


def interface_addresses(facts, interface):
    """Every IPv4 and IPv6 address Ansible's setup facts show on one interface."""
    data = facts.get(interface.replace("-", "_")) or facts.get(interface) or {}
    found = []
    entries = [data.get("ipv4") or {}, *(data.get("ipv4_secondaries") or []), *(data.get("ipv6") or [])]
    for entry in entries:
        if entry.get("address"):
            found.append(entry["address"])
    return found


def fabric_problems(facts, node, address, interface=""):
    """Refuse a fabric address the node does not hold: every peer would dial it and the proxy would route to it."""
    if not address:
        return []
    try:
        wanted = ipaddress.ip_address(address)
    except ValueError:
        return [f"{node}: gb10_fabric_address {address!r} is not an IP address. Fix: set the node's fabric address"]
    held = [
        a.split("%")[0]
        for a in list(facts.get("all_ipv4_addresses") or []) + list(facts.get("all_ipv6_addresses") or [])
    ]
    if str(wanted) not in {str(ipaddress.ip_address(a)) for a in held}:
        return [
            f"{node}: gb10_fabric_address {address} is not one of the node's addresses "
            f"({', '.join(sorted(held)) or 'none'}). Fix: set gb10_fabric_address to its fabric (200 GbE) address"
        ]
    if interface:
        if interface not in (facts.get("interfaces") or []):
            return [
                f"{node}: gb10_fabric_interface {interface} does not exist on the node (it has "
                f"{', '.join(sorted(facts.get('interfaces') or [])) or 'none'}). Fix: name the fabric interface"
            ]
        on_interface = {str(ipaddress.ip_address(a.split("%")[0])) for a in interface_addresses(facts, interface)}
        if str(wanted) not in on_interface:
            return [
                f"{node}: gb10_fabric_address {address} is not on gb10_fabric_interface {interface} (which has "
                f"{', '.join(sorted(on_interface)) or 'no address'}). Fix: set the interface that holds the address"
            ]
    return []


def collect(hostvars, hosts, roles, extra_key):
    """Every problem, node by node in inventory order, each role's in the order the roles run."""
    problems = []
    for host in hosts:
        node = hostvars[host]
        for key in [f"__{role}_problems" for role in roles] + [extra_key]:
            value = node.get(key) if hasattr(node, "get") else None
            problems.extend(str(p) for p in (value or []))
    return problems
