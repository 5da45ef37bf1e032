# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Every port fenced to who needs it (issue 37 item 1, ``exposure.py``): the fence can name every host it lets in,
an opening says what it opens and why, and no two of the collection's listeners share a port on one node."""

from __future__ import annotations

from . import exposure as _exposure
from .registry import rule
from .violation import ALL_NODES, violation

PITFALL = "issue 37: every port fenced to who needs it"


@rule("fence_open", pitfall=PITFALL)
def fence_open(ctx):
    """gb10_fence_open entries that cannot be applied: a service the collection has not, a source that is no
    address or CIDR, no reason."""
    for index, value, why in _exposure.opening_problems(ctx.site):
        yield violation(
            ALL_NODES,
            "fence_open",
            value,
            f"gb10_fence_open[{index}]: {value!r} {why}. Each entry is {{service: <one of "
            f"{', '.join(_exposure.OPENABLE)}>, from: [<address or CIDR>, ...], why: <who needs it>}}",
        )


@rule("fence_addresses", pitfall=PITFALL)
def fence_addresses(ctx):
    """A proxy or monitoring host without gb10_fabric_address: the fence could not let it in. (A node of the plan
    without one is replica_address_missing's.)"""
    if ctx.site is None:
        return
    for host in _exposure.missing_addresses(ctx.site, ()):
        if host in ctx.nodes:
            continue
        yield violation(
            host,
            "fence_addresses",
            None,
            f"{host} has no gb10_fabric_address: roles/fabric_firewall lets each of the collection's ports in only "
            "from the addresses of the hosts that need it (the proxy and monitoring nodes, the site's nodes), and "
            f"could not let {host} in. Set gb10_fabric_address for {host} in the inventory",
        )


@rule("fence_ports_distinct", pitfall=PITFALL)
def fence_ports_distinct(ctx):
    """Two of the collection's listeners on one port of one node: one of them could not bind, and the fence could
    not tell them apart."""
    for host, entries in sorted((ctx.exposure or {}).items()):
        for port, names in _exposure.port_clashes(entries):
            if names == ["replica", "tp_group"]:
                continue  # the launcher's own rule (mp_settings, ray_settings) names that clash and its fix
            yield violation(
                host,
                "fence_ports_distinct",
                port,
                f"{host}: {' and '.join(names)} would both listen on port {port}: give each its own port "
                f"({', '.join(_exposure.BY_NAME[n].variable for n in names)})",
            )
