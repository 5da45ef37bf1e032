# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The floating proxy address: which node advertises to which, at what priority, and every reason to refuse.

Pure functions over plain data; ``plugins/action/proxy_vip_plan.py`` hands them the inventory's figures and
``roles/proxy_vip`` renders keepalived.conf from the result. One VRRP instance: every proxy node starts as
BACKUP, adverts go unicast between the nodes' fabric addresses (no multicast needed on the fabric), and the
floating address lives on the interface clients reach the nodes on. The refusals are the registered rules
of the ``proxy_vip`` planner (``rules_proxy_vip.py``), in the one violation shape of every plan.
"""

from __future__ import annotations

import ipaddress

from . import registry

# Addresses HAProxy binds that also cover an address added later by keepalived. A bind to one concrete address
# could not take the floating address on a backup without net.ipv4.ip_nonlocal_bind (read-only in a container).
WILDCARD_BINDS = ("*", "", "0.0.0.0", "::", "[::]")
# VRRP priority 255 belongs to an address owner (RFC 5798 5.2.4); the floating address is owned by no node.
PRIORITY_RANGE = (1, 254)
DEFAULT_TOP_PRIORITY = 150
PRIORITY_STEP = 10


def interface_network(cidr):
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


class VipContext:
    """What the ``proxy_vip`` rules read: the inputs and every derived value, computed once."""

    def __init__(self, address, prefix, hosts, nodes, virtual_router_id, advert_int, bind_address, other_addresses):
        self.address, self.prefix = address, prefix
        self.hosts = list(hosts or [])
        self.nodes = nodes or {}
        self.virtual_router_id, self.advert_int, self.bind_address = virtual_router_id, advert_int, bind_address
        self.other_addresses = other_addresses or {}
        self.vip, self.address_problems = check_address(address, prefix)
        try:
            self.vrid = int(virtual_router_id)
        except (TypeError, ValueError):
            self.vrid = 0
        try:
            self.advert = float(advert_int)
        except (TypeError, ValueError):
            self.advert = 0.0
        derived = default_priorities(self.hosts)
        self.sources, self.priorities = {}, {}
        for host in self.hosts:
            node = self.node(host)
            source = interface_network(node.get("fabric_address")) if node.get("fabric_address") else None
            if source is not None:
                self.sources[host] = str(source.ip)
            wanted = node.get("priority")
            self.priorities[host] = int(wanted) if wanted not in (None, "", 0, "0") else derived[host]

    def node(self, host):
        return self.nodes.get(host) or {}

    def vip_interface(self, host):
        node = self.node(host)
        return node.get("vip_interface") or node.get("fabric_interface")


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
    priority, interface, vip_interface}}, violations: [{node, rule, value, message}]}: every violation at once.
    """
    ctx = VipContext(address, prefix, hosts, nodes, virtual_router_id, advert_int, bind_address, other_addresses)
    violations = registry.run(ctx, planner="proxy_vip")
    planned_nodes = {}
    for host in ctx.hosts:
        planned_nodes[host] = {
            "unicast_src_ip": ctx.sources.get(host),
            "unicast_peers": [ctx.sources[peer] for peer in ctx.hosts if peer != host and peer in ctx.sources],
            "priority": ctx.priorities.get(host),
            "interface": ctx.node(host).get("fabric_interface"),
            "vip_interface": ctx.vip_interface(host),
        }
    vip = ctx.vip
    return {
        "address": str(vip.ip) if vip is not None else None,
        "prefix": vip.network.prefixlen if vip is not None else None,
        "virtual_router_id": ctx.vrid,
        "advert_int": advert_int,
        "nodes": planned_nodes,
        "violations": violations,
    }
