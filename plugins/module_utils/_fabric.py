# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The fabric under a tensor-parallel group, measured before the group starts (issue 39, item 3).

A split model over a misconfigured 200 GbE link runs at a fraction of its speed without complaint: two DGX Sparks on
one QSFP 200G cable reached ~3 GB/s all_gather busbw, ~12% of the link (NVIDIA/dgx-spark-playbooks#102; its fix
NVIDIA/dgx-spark-playbooks#103 names the CX-7 MTU defaulting to 1500 and the data-path HCAs); an MTU that differs
between the ranks or a wrong interface hangs NCCL (NCCL_SOCKET_IFNAME names the bootstrap interface only). So before
a tensor-parallel profile starts, each rank's fabric interface is up, at the MTU the plan states on every rank (or
the same on all where the plan states none), and the TCP bandwidth between the head and each rank, measured with
iperf3 for a few seconds, is above the profile's floor.

Pure functions over ``ip -j link show dev <if>`` and ``iperf3 --json`` output (iproute2 and iperf3 as Debian 12 ships
them); each problem is one line with the node, the numbers and the fix.
"""

from __future__ import annotations

import json

# The default floor, Gbit/s of one iperf3 TCP stream from each rank to the head. dgx-spark-playbooks#102's
# misconfigured 200G link carried ~3 GB/s (~24 Gbit/s) of NCCL traffic, the fixed one 23.74 GB/s (~190 Gbit/s,
# dgx-spark-playbooks#103): a floor of 25 Gbit/s refuses the first. Not measured on a GB10 here: a single TCP
# stream may stay below the link's NCCL figure, so a site sets its own floor from its own iperf3 figure.
DEFAULT_FLOOR_GBIT = 25.0
DEFAULT_SECONDS = 3
# The MTUs a fabric interface may state: IPv4's minimum to a jumbo frame's usual maximum.
MTU_RANGE = (576, 9216)


def link(ip_json_text):
    """``ip -j link show dev <if>`` as {ifname, mtu, up, operstate, flags}; None for no such interface."""
    try:
        entries = json.loads(ip_json_text or "[]")
    except ValueError:
        return None
    if not entries:
        return None
    entry = entries[0]
    flags = list(entry.get("flags") or [])
    operstate = entry.get("operstate") or ""
    # administratively up with a carrier (LOWER_UP); a veth or a loopback may say UNKNOWN but carry
    up = "UP" in flags and "LOWER_UP" in flags and operstate != "DOWN"
    return {"ifname": entry.get("ifname"), "mtu": entry.get("mtu"), "up": up, "operstate": operstate, "flags": flags}


def iperf3_gbit(json_text):
    """(Gbit/s received, error) from ``iperf3 -c ... --json``: end.sum_received for TCP."""
    try:
        found = json.loads(json_text or "")
    except ValueError:
        return None, "iperf3 printed no JSON"
    if found.get("error"):
        return None, str(found["error"])
    received = ((found.get("end") or {}).get("sum_received") or {}).get("bits_per_second")
    if received is None:
        return None, "iperf3's JSON has no end.sum_received"
    return received / 1e9, None


def link_problems(ranks, planned_mtu):
    """Every rank's fabric interface up, at the planned MTU (or, with none planned, the same MTU on every rank).

    ranks: {host: {"ifname": name, "link": link() or None}} in rank order."""
    problems = []
    for host, rank in ranks.items():
        ifname, found = rank["ifname"], rank["link"]
        if found is None:
            problems.append(
                f"{host}: the fabric interface {ifname} does not exist (ip link show dev {ifname}): NCCL and Gloo "
                "would bind to nothing or to another interface and the group hang. Fix gb10_fabric_interface"
            )
        elif not found["up"]:
            problems.append(
                f"{host}: the fabric interface {ifname} is not up (operstate {found['operstate'] or '?'}, flags "
                f"{','.join(found['flags'])}): fix the link (cable, ip link set dev {ifname} up) before the split"
            )
    mtus = {host: rank["link"]["mtu"] for host, rank in ranks.items() if rank["link"] is not None}
    if planned_mtu:
        for host, mtu in mtus.items():
            if mtu != planned_mtu:
                problems.append(
                    f"{host}: the fabric interface {ranks[host]['ifname']} has MTU {mtu}, the plan states "
                    f"{planned_mtu} on every rank: an MTU that differs between the ranks hangs NCCL "
                    "(NVIDIA/dgx-spark-playbooks#102). Fix: ip link set dev {} mtu {} (and make it persistent in "
                    "the node's network configuration)".format(ranks[host]["ifname"], planned_mtu)
                )
    elif len(set(mtus.values())) > 1:
        listed = ", ".join(f"{host} {mtu}" for host, mtu in mtus.items())
        problems.append(
            f"the tensor-parallel ranks' fabric interfaces differ in MTU ({listed}): an MTU mismatch hangs NCCL "
            "(NVIDIA/dgx-spark-playbooks#102). Fix: set one MTU on every rank and state it as the profile's "
            "fabric.mtu"
        )
    return problems


def bandwidth_problems(measured, floor_gbit, head):
    """measured: {rank host: (gbit or None, error)} from each rank to ``head``; refused below ``floor_gbit``."""
    problems = []
    for host, (gbit, error) in measured.items():
        if gbit is None:
            problems.append(
                f"{host}: the fabric bandwidth to {head} could not be measured (iperf3: {error}). Fix: install "
                f"iperf3 on both, and let {host} reach {head} on the fabric"
            )
        elif gbit < floor_gbit:
            problems.append(
                f"{host}: {gbit:.2f} Gbit/s to {head} over the fabric (iperf3, one TCP stream) is below the "
                f"profile's floor {floor_gbit:g} Gbit/s: a split over a link far below its rated speed runs at a "
                "fraction of it without complaint (NVIDIA/dgx-spark-playbooks#102: ~3 GB/s on a 200G link). Fix the "
                "link (MTU, the interface's speed: ethtool; the cable) or, where this figure is that link's best, "
                "lower fabric.bandwidth_floor_gbit"
            )
    return problems


def report(measured, floor_gbit, head):
    """One line per rank for the plan's report: the measured Gbit/s to the head and the floor."""
    lines = []
    for host, (gbit, error) in measured.items():
        figure = f"{gbit:.2f} Gbit/s" if gbit is not None else f"not measured ({error})"
        lines.append(f"{host} -> {head}: {figure} (floor {floor_gbit:g} Gbit/s)")
    return lines
