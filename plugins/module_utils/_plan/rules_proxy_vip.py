# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Rules of the floating proxy address (the ``proxy_vip`` planner, ``proxy_vip.py``)."""

from __future__ import annotations

from .inputs import ifname_problem
from .proxy_vip import PRIORITY_RANGE, WILDCARD_BINDS, interface_network
from .registry import rule
from .violation import ALL_NODES, violation

_RESTART = "seed 002: either node can restart without taking the model down"


def _own_address_on_vip_interface(ctx):
    """Hosts whose VIP interface already holds the floating address."""
    found = []
    for host in ctx.hosts:
        local = _local(ctx, host)
        if local is not None and ctx.vip is not None and ctx.vip.ip == local.ip:
            found.append(host)
    return found


def _local(ctx, host):
    """The VIP interface's own address of ``host`` (ip_interface), or None when it has none or it is no address."""
    interfaces = ctx.node(host).get("interfaces") or {}
    name = ctx.vip_interface(host)
    if not name or name not in interfaces:
        return None
    return interface_network(interfaces[name])


@rule("address", pitfall=_RESTART, planner="proxy_vip")
def address(ctx):
    for problem in ctx.address_problems:
        yield violation(ALL_NODES, "address", ctx.address, problem)
    if ctx.vip is None:
        return
    held = _own_address_on_vip_interface(ctx)
    for host in held:
        yield violation(
            host,
            "address",
            str(ctx.vip.ip),
            f"proxy_vip_address {ctx.vip.ip} is this node's own address on {ctx.vip_interface(host)}; the floating "
            "address must be one no node holds by itself",
        )
    named = set(held) | ({ALL_NODES} if ctx.address_problems else set())
    for host, owned in sorted({**ctx.other_addresses, **ctx.sources}.items()):
        parsed = interface_network(owned) if owned else None
        if parsed is not None and parsed.ip == ctx.vip.ip and host not in named:
            yield violation(
                host,
                "address",
                str(ctx.vip.ip),
                f"proxy_vip_address {ctx.vip.ip} is this node's own address; the floating address must be "
                "one no node holds by itself",
            )


@rule("peers", pitfall=_RESTART, planner="proxy_vip")
def peers(ctx):
    if len(ctx.hosts) < 2:
        yield violation(
            ALL_NODES,
            "peers",
            len(ctx.hosts),
            f"a floating address needs the proxy on two nodes or more; group gb10_proxy has {len(ctx.hosts)} "
            f"({', '.join(ctx.hosts) or 'none'}): add the other nodes to gb10_proxy, or unset proxy_vip_address",
        )


@rule("virtual_router_id", pitfall="input validation", planner="proxy_vip")
def virtual_router_id(ctx):
    if not 1 <= ctx.vrid <= 255:
        yield violation(
            ALL_NODES,
            "virtual_router_id",
            ctx.virtual_router_id,
            f"proxy_vip_virtual_router_id is {ctx.virtual_router_id!r}; VRRP needs 1..255, unique among the "
            "VRRP routers of this network",
        )


@rule("advert_int", pitfall="input validation", planner="proxy_vip")
def advert_int(ctx):
    if not 0 < ctx.advert <= 255:
        yield violation(
            ALL_NODES,
            "advert_int",
            ctx.advert_int,
            f"proxy_vip_advert_int is {ctx.advert_int!r}; seconds between adverts, more than 0 and at most 255",
        )


@rule("bind", pitfall=_RESTART, planner="proxy_vip")
def bind(ctx):
    if str(ctx.bind_address).strip() not in WILDCARD_BINDS:
        yield violation(
            ALL_NODES,
            "bind",
            ctx.bind_address,
            f"gb10_proxy_bind_address is {ctx.bind_address}: HAProxy on a backup node could not accept connections on "
            "the floating address when it arrives (binding an address a node does not hold needs "
            "net.ipv4.ip_nonlocal_bind); set gb10_proxy_bind_address: '*'",
        )


@rule("unicast_src", pitfall="input validation", planner="proxy_vip")
def unicast_src(ctx):
    for host in ctx.hosts:
        if host not in ctx.sources:
            source = ctx.node(host).get("fabric_address")
            yield violation(
                host,
                "unicast_src",
                source,
                f"gb10_fabric_address is {source!r}; VRRP adverts go unicast between the proxies' fabric "
                "addresses: set gb10_fabric_address for this node",
            )
    seen = {}
    for host, source in ctx.sources.items():
        if source in seen:
            yield violation(
                host,
                "unicast_src",
                source,
                f"fabric address {source} is also {seen[source]}'s; each node needs its own",
            )
        seen.setdefault(source, host)


@rule("priority", pitfall="input validation", planner="proxy_vip")
def priority(ctx):
    for host in ctx.hosts:
        value = ctx.priorities[host]
        if not PRIORITY_RANGE[0] <= value <= PRIORITY_RANGE[1]:
            yield violation(
                host,
                "priority",
                value,
                f"proxy_vip_priority is {value}; a node that does not own the address takes "
                f"{PRIORITY_RANGE[0]}..{PRIORITY_RANGE[1]}",
            )


@rule("interface", pitfall="input validation", planner="proxy_vip")
def interface(ctx):
    for host in ctx.hosts:
        if not ctx.node(host).get("fabric_interface"):
            yield violation(
                host,
                "interface",
                None,
                "gb10_fabric_interface is unset; VRRP adverts leave on the fabric interface",
            )


@rule("vip_interface", pitfall="input validation", planner="proxy_vip")
def vip_interface(ctx):
    if ctx.vip is None:
        return
    for host in ctx.hosts:
        name, interfaces = ctx.vip_interface(host), ctx.node(host).get("interfaces") or {}
        if not name:
            continue
        if name not in interfaces:
            yield violation(
                host,
                "vip_interface",
                name,
                f"proxy_vip_interface {name} is not among this node's interfaces with an IPv4 address "
                f"({', '.join(sorted(interfaces)) or 'none known'}); name the interface clients reach the node on, "
                "or state it in gb10_stated_facts.interfaces",
            )
        elif _local(ctx, host) is None:
            yield violation(
                host, "vip_interface", interfaces[name], f"{name} has address {interfaces[name]!r}, not a.b.c.d/p"
            )


@rule("vip_subnet", pitfall=_RESTART, planner="proxy_vip")
def vip_subnet(ctx):
    vip = ctx.vip
    if vip is None:
        return
    for host in ctx.hosts:
        local, name = _local(ctx, host), ctx.vip_interface(host)
        if local is None or vip.ip == local.ip:
            continue
        if vip.ip not in local.network:
            yield violation(
                host,
                "vip_subnet",
                str(vip.ip),
                f"proxy_vip_address {vip.ip} is outside {name}'s subnet {local.network} ({local}); clients "
                "on that subnet could not reach it: pick a free address of that subnet",
            )
        elif local.network.prefixlen != vip.network.prefixlen:
            yield violation(
                host,
                "vip_subnet",
                vip.network.prefixlen,
                f"proxy_vip_prefix is {vip.network.prefixlen} but {name} is {local}; set proxy_vip_prefix: "
                f"{local.network.prefixlen}",
            )


@rule("interface_name", pitfall="input validation", planner="proxy_vip")
def interface_name(ctx):
    """keepalived.conf carries the interface names bare (``interface``, ``dev``, ``track_interface``)."""
    for host in ctx.hosts:
        node = ctx.node(host)
        for var, name in (
            ("gb10_fabric_interface", node.get("fabric_interface")),
            ("proxy_vip_interface", node.get("vip_interface")),
        ):
            problem = ifname_problem(name) if name else ""
            if problem:
                yield violation(
                    host,
                    "interface_name",
                    name,
                    f"{var} of {host} is {name!r}, which {problem}; keepalived.conf is written with it: set it to "
                    "the name `ip -br link` shows on the node",
                )
