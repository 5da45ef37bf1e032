# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""vLLM's own multi-node launch (the ``mp`` launcher): its settings, its ports, and what the firewall lets in.

The head runs ``vllm serve ... --nnodes N --node-rank 0 --master-addr <head> --master-port <port>`` and serves the
API; every other rank runs the same argv with ``--node-rank k --headless`` (vLLM 0.32 ``vllm/entrypoints/cli/
serve.py``: a headless node starts its local workers and no API server). torch.distributed's TCPStore listens on
the master port on the head. Everything else the group opens binds port 0, so the kernel picks from its ephemeral
range: gloo's and NCCL's pair and bootstrap sockets, and vLLM's own ZMQ message queues between the head's executor
and the remote workers (``vllm.utils.network_utils.get_open_port`` binds port 0 unless ``VLLM_PORT`` is set). The
firewall (roles/fabric_firewall) therefore admits the group's fabric addresses to the master port and to the
ephemeral range, and refuses both from anyone else; replies to a node's own connections pass as established.
"""

from __future__ import annotations

# torch.distributed's default master port and vLLM 0.32's --master-port default.
DEFAULT_MASTER_PORT = 29501
# Linux's default net.ipv4.ip_local_port_range; roles/fabric_firewall checks the node's own range lies inside it.
DEFAULT_EPHEMERAL = (32768, 60999)
SETTINGS = ("firewall", "master_port", "ephemeral_ports")


def _port(value):
    return not isinstance(value, bool) and isinstance(value, int) and 1024 <= value <= 65535


def settings(profile):
    """``(firewall, master_port, ephemeral, problems)`` from the profile's ``mp:`` mapping, defaults filled in.

    problems: ``[(field, value, why)]``; a bad field keeps its default so that the rest still plans.
    """
    given = profile.get("mp")
    problems = []
    if given is None:
        given = {}
    if not isinstance(given, dict):
        problems.append(("mp", given, "must be a mapping (" + ", ".join(SETTINGS) + ")"))
        given = {}
    for key in sorted(set(given) - set(SETTINGS), key=str):
        problems.append((f"mp.{key}", given[key], "is not a setting of mp: (" + ", ".join(SETTINGS) + "): remove it"))
    firewall = given.get("firewall", True)
    if not isinstance(firewall, bool):
        problems.append(("mp.firewall", firewall, "must be true or false"))
        firewall = True
    master = given.get("master_port", DEFAULT_MASTER_PORT)
    if not _port(master):
        problems.append(("mp.master_port", master, "must be a port number from 1024 to 65535"))
        master = DEFAULT_MASTER_PORT
    ephemeral = given.get("ephemeral_ports", list(DEFAULT_EPHEMERAL))
    if (
        not isinstance(ephemeral, (list, tuple))
        or len(ephemeral) != 2
        or not all(_port(p) for p in ephemeral)
        or ephemeral[0] > ephemeral[1]
    ):
        problems.append(
            (
                "mp.ephemeral_ports",
                ephemeral,
                "must be [low, high], the nodes' net.ipv4.ip_local_port_range (ports from 1024 to 65535)",
            )
        )
        ephemeral = list(DEFAULT_EPHEMERAL)
    return firewall, master, [int(ephemeral[0]), int(ephemeral[1])], problems


def port_clashes(master, ephemeral, others):
    """``[(value, why, fix)]``: why the group's ports cannot be bound beside the plan's other ports; [] when fine.

    ``others``: ``{port: what}`` of the plan's other listening ports on the group's nodes.
    """
    clashes = []
    low, high = ephemeral
    move_master = f"Set mp.master_port to a free port below {low} (default {DEFAULT_MASTER_PORT})"
    if master in others:
        clashes.append((master, f"the master port {master} is also {others[master]}", move_master))
    if low <= master <= high:
        clashes.append(
            (
                master,
                f"the master port {master} lies in the ephemeral range {low}-{high}, where any outgoing connection "
                "of the node may hold it when the head starts",
                move_master,
            )
        )
    for port, what in sorted(others.items()):
        if low <= port <= high:
            clashes.append(
                (
                    port,
                    f"{what} ({port}) lies in the ephemeral range {low}-{high} that the group's sockets bind from, "
                    "so a rank's socket may hold it when vLLM starts",
                    f"Move {what} below {low}, or set mp.ephemeral_ports to the nodes' net.ipv4.ip_local_port_range "
                    "if it leaves that port out",
                )
            )
    return clashes


def launch_argv(size, rank, master_address, master_port):
    """The multi-node words of one rank's ``vllm serve`` (vLLM 0.32's parser: ``--nnodes``, ``--node-rank``,
    ``--master-addr``, ``--master-port``, ``--headless``)."""
    words = [
        "--tensor-parallel-size",
        str(size),
        "--distributed-executor-backend",
        "mp",
        "--nnodes",
        str(size),
        "--node-rank",
        str(rank),
        "--master-addr",
        str(master_address),
        "--master-port",
        str(master_port),
    ]
    return [*words, "--headless"] if rank else words
