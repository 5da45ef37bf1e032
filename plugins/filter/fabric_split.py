# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters of the fabric measured before a tensor-parallel split (issue 39 item 3): fabric_link_problems (each rank's
interface up at the plan's MTU, node_preflight) and fabric_bandwidth (iperf3 from each rank to the head, serving).

Each filter's documentation is its own sidecar file (plugins/filter/<filter name>.yml).
"""

from __future__ import annotations

from ansible_collections.gb10.serving.plugins.module_utils import _fabric


def _registered(hostvars, host, key):
    node = hostvars.get(host) or {}
    return (node.get(key) if hasattr(node, "get") else None) or {}


def fabric_link_problems(hostvars, fabric, key="__node_preflight_fabric_link"):
    """Every rank's ``ip -j link show dev <if>`` (registered as ``key``) against the plan's fabric entry."""
    if not fabric:
        return []
    ranks = {}
    for host, rank in (fabric.get("ranks") or {}).items():
        registered = _registered(hostvars, host, key)
        ranks[host] = {"ifname": rank.get("interface"), "link": _fabric.link(registered.get("stdout", ""))}
    return _fabric.link_problems(ranks, fabric.get("mtu"))


def fabric_bandwidth(hostvars, fabric, key="__serving_fabric_iperf3"):
    """{problems, report}: each rank's ``iperf3 -c <head> --json`` (registered as ``key``) against the floor."""
    if not fabric:
        return {"problems": [], "report": []}
    head = fabric.get("head")
    measured = {}
    for host in fabric.get("ranks") or {}:
        if host == head:
            continue
        registered = _registered(hostvars, host, key)
        if registered.get("skipped") or not registered:
            measured[host] = (None, "not run on this rank")
        else:
            measured[host] = _fabric.iperf3_gbit(registered.get("stdout", "") or registered.get("stderr", ""))
    floor = float(fabric.get("bandwidth_floor_gbit") or 0)
    return {
        "problems": _fabric.bandwidth_problems(measured, floor, head),
        "report": _fabric.report(measured, floor, head),
    }


class FilterModule:
    def filters(self):
        return {"fabric_link_problems": fabric_link_problems, "fabric_bandwidth": fabric_bandwidth}
