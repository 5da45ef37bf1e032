# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Tensor-parallel rules: every rank's address and interfaces, Ray's settings, the heads split, and the
per-node values that only the head's ``vllm serve`` reads (``tp.py`` holds the arithmetic)."""

from __future__ import annotations

import ipaddress

from . import mp as _mp
from . import tp as _tp
from .checks import each_node
from .context import LAUNCHERS, uses_mp, uses_ray
from .registry import rule
from .violation import ALL_NODES, violation

_WRONG_IP = "seed 000: Ray registering the wrong node IP"


def _fmt(value):
    return f"{value:.2f}" if isinstance(value, float) else str(value)


@rule("tp_fabric_cidr", pitfall=_WRONG_IP)
def tp_fabric_cidr(ctx):
    if ctx.tensor_parallel and ctx.cidr is None:
        yield violation(
            ALL_NODES,
            "tp_fabric_cidr",
            ctx.fabric_cidr,
            f"gb10_fabric_cidr {ctx.fabric_cidr!r} is not a subnet: set it to the fabric network "
            "(e.g. 192.168.200.0/24) so the plan can check every rank's address",
        )


@rule("tp_node_ip", pitfall=_WRONG_IP)
def tp_node_ip(ctx):
    if not ctx.tensor_parallel:
        return
    for host in ctx.hosts:
        address = ctx.per_node[host]["address"]
        try:
            ip = ipaddress.ip_address(str(address))
        except ValueError:
            yield violation(
                host,
                "tp_node_ip",
                address,
                f"gb10_fabric_address of {host} is {address!r}, not an IP address: "
                "set it to the node's address on the fabric",
            )
            continue
        if ctx.cidr is not None and ip not in ctx.cidr:
            yield violation(
                host,
                "tp_node_ip",
                str(ip),
                f"the fabric address of {host} (its rank's address) is {ip}, outside the fabric subnet {ctx.cidr}: "
                "NCCL would route "
                f"the collective over another network. Set gb10_fabric_address to {host}'s address on {ctx.cidr}",
            )
    seen = {}
    for host in ctx.hosts:
        address = ctx.per_node[host]["address"]
        if address in seen:
            yield violation(
                host,
                "tp_node_ip",
                address,
                f"{seen[address]} and {host} both have fabric address {address}: every rank needs its own "
                "address; fix gb10_fabric_address",
            )
        else:
            seen[address] = host


@rule("tp_vllm_host_ip", pitfall=_WRONG_IP)
def tp_vllm_host_ip(ctx):
    if not ctx.tensor_parallel:
        return
    for host in ctx.hosts:
        env, address = ctx.per_node[host]["env"], ctx.per_node[host]["address"]
        if env.get("VLLM_HOST_IP") != str(address):
            yield violation(
                host,
                "tp_vllm_host_ip",
                env.get("VLLM_HOST_IP"),
                "VLLM_HOST_IP on {} is {} but its fabric address (Ray's --node-ip-address, vLLM's rank address) "
                "is {}: they must be equal. Remove "
                "VLLM_HOST_IP from the profile's env (the plan sets it per node from gb10_fabric_address)".format(
                    host, env.get("VLLM_HOST_IP"), address
                ),
            )


@rule("tp_socket_ifname", pitfall="seed 000: NCCL/GLOO interface selection")
def tp_socket_ifname(ctx):
    if not ctx.tensor_parallel:
        return
    for host in ctx.hosts:
        figures = ctx.per_node[host]
        env, address = figures["env"], figures["address"]
        interfaces = figures["facts"].get("interfaces") or {}
        for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
            name = env.get(var)
            if name not in interfaces:
                yield violation(
                    host,
                    "tp_socket_ifname",
                    name,
                    "{var}={name} on {host} names no interface of that node (it has {has}): set "
                    "gb10_fabric_interface to the interface that holds {address}, and remove {var} from the "
                    "profile's env".format(
                        var=var, name=name, host=host, has=", ".join(sorted(interfaces)) or "none", address=address
                    ),
                )
                continue
            held = str(interfaces[name]).split("/", maxsplit=1)[0]
            if held != str(address):
                yield violation(
                    host,
                    "tp_socket_ifname",
                    name,
                    f"{var}={name} on {host}, but {name} holds {held}, not the node's fabric address {address}: "
                    f"point gb10_fabric_interface at the interface with {address} (or fix gb10_fabric_address)",
                )


@rule("tp_ray_memory_monitor", pitfall="seed 000: Ray's memory monitor killing CUDA-graph capture at 95 %")
def tp_ray_memory_monitor(ctx):
    if not uses_ray(ctx):
        return ()
    return each_node(
        ctx,
        "tp_ray_memory_monitor",
        lambda figures: figures["env"].get("RAY_memory_monitor_refresh_ms") != "0",
        lambda figures: figures["env"].get("RAY_memory_monitor_refresh_ms"),
        "RAY_memory_monitor_refresh_ms on {host} is {value!r}: Ray's memory monitor kills workers on unified "
        "memory, where the model's allocation is host memory. Remove it from the profile's env (the plan sets 0)",
    )


_LAUNCH = "issue 35: Ray hangs multi-node groups in the field; vLLM's own multi-node launch is the default"


@rule("tp_launcher", pitfall=_LAUNCH)
def tp_launcher(ctx):
    if ctx.tensor_parallel and ctx.launcher_given is not None and ctx.launcher_given not in LAUNCHERS:
        yield violation(
            ALL_NODES,
            "tp_launcher",
            ctx.launcher_given,
            f"launcher {ctx.launcher_given!r} is not one of {', '.join(LAUNCHERS)}: set launcher: mp (vLLM's own "
            "multi-node launch, --nnodes/--node-rank/--headless; the default, or leave launcher out) or launcher: "
            "ray (a Ray head and workers)",
        )


@rule("tp_executor_backend", pitfall="seed 004: vLLM flags that look right and are not")
def tp_executor_backend(ctx):
    backend = ctx.options.get("distributed-executor-backend")
    if not ctx.tensor_parallel or backend is None:
        return
    wanted = "ray" if uses_ray(ctx) else "mp"
    if backend == wanted:
        return
    size = len(ctx.hosts)
    how = "set by the profile" if ctx.launcher_given is not None else "the default launcher"
    yield violation(
        ALL_NODES,
        "tp_executor_backend",
        backend,
        f"vllm_options.distributed-executor-backend is {backend!r} but the group's launcher is {ctx.launcher} "
        f"({how}), which runs --distributed-executor-backend {wanted} across its {size} nodes: the two would "
        f"disagree, and a backend that is neither fails with 'World size ({size}) is larger than the number of "
        "available GPUs (1)'. Remove distributed-executor-backend from vllm_options (the launcher writes it) and "
        "set launcher: ray for a Ray cluster or launcher: mp for vLLM's own multi-node launch",
    )


# torch.distributed's own rendezvous variables: the plan passes the head's address and port in every rank's argv.
MP_ENV = ("MASTER_ADDR", "MASTER_PORT")
# What every rank of a group must share; a per-node value would put the ranks on different images or weights.
SAME_ON_EVERY_RANK = ("image", "model", "revision", "vllm_options", "env", "launcher")


@rule("tp_rank_same_target", pitfall="seed 004: no shared filesystem, one image and weights on every node")
def tp_rank_same_target(ctx):
    """Refuse per-node image, model, options or env in a tensor-parallel group: every rank runs the one argv."""
    if not ctx.tensor_parallel:
        return
    for host in ctx.hosts:
        settings = ((ctx.profile.get("nodes") or {}).get(host)) or {}
        for key in SAME_ON_EVERY_RANK:
            if key in settings:
                yield violation(
                    host,
                    "tp_rank_same_target",
                    f"nodes.{host}.{key}",
                    f"nodes.{host}.{key} would give {host} its own {key}, but every rank of a tensor-parallel "
                    "group must load the same image digest, weights revision, options and environment (the ranks "
                    "exchange tensors of one model; different builds hang or corrupt the collective). Remove "
                    f"nodes.{host}.{key} and set it once for the profile",
                )


@rule("mp_settings", pitfall=_LAUNCH)
def mp_settings(ctx):
    """The mp launcher's settings are sound and its master port is free on every rank."""
    if not uses_mp(ctx):
        return
    for field, value, why in ctx.mp_problems:
        yield violation(ALL_NODES, "mp_settings", value, f"{field} {value!r} {why}")
    others = {}
    if isinstance(ctx.port, int):
        others[ctx.port] = "vLLM's port (port:)"
    api = ctx.api or {}
    if isinstance(api.get("port"), int):
        others.setdefault(api["port"], "the proxy's client port (gb10_proxy_port)")
    for name in MP_ENV:
        if name in ctx.profile_env:
            yield violation(
                ALL_NODES,
                "mp_settings",
                name,
                f"env {name} would point torch.distributed elsewhere than the plan's --master-addr "
                f"{ctx.head_address} --master-port {ctx.mp_master_port} (the head's fabric address): remove it "
                "from the profile's env and set mp.master_port",
            )
    for value, clash, fix in _mp.port_clashes(ctx.mp_master_port, ctx.mp_ephemeral, others):
        yield violation(
            ALL_NODES,
            "mp_settings",
            value,
            f"vLLM's multi-node launch cannot bind its ports on the group's nodes ({', '.join(ctx.hosts)}): {clash}. "
            f"{fix}",
        )


@rule("mp_open", pitfall="issue 37: every port fenced to who needs it")
def mp_open(ctx):
    """vLLM's multi-node launch has no authentication: its firewall is the only fence, never turned off."""
    if uses_mp(ctx) and not ctx.mp_firewall:
        yield violation(
            ALL_NODES,
            "mp_open",
            "mp.firewall=false",
            f"mp.firewall is false: torch.distributed's store on {ctx.head_address}:{ctx.mp_master_port} and the "
            f"ranks' gloo/NCCL sockets and vLLM's message queues in {ctx.mp_ephemeral[0]}-{ctx.mp_ephemeral[1]} "
            f"accept anyone who reaches the nodes {', '.join(ctx.hosts)}, with no authentication (unlike Ray's "
            "token, vLLM's launch has none). Remove mp.firewall (true is the default): roles/fabric_firewall lets "
            "them in from the group's fabric addresses only",
        )


@rule("tp_heads_divisible", pitfall="seed 000: tensor-parallel 2 over Ray across two nodes")
def tp_heads_divisible(ctx):
    heads = ctx.heads
    if not heads["checked"] or heads["fit"]:
        return
    count, kv_count, size = heads["num_heads"], heads["num_kv_heads"], ctx.tp_size
    sizes = _tp.fitting_sizes(count, kv_count, len(ctx.nodes))
    fix = (
        "make the group (gb10_ray_head + gb10_ray_workers) {} nodes".format(" or ".join(map(str, sizes)))
        if sizes
        else f"no group of 2 to {len(ctx.nodes)} nodes of this inventory fits: serve the model as replicas"
    )
    yield violation(
        ALL_NODES,
        "tp_heads_divisible",
        size,
        "the tensor-parallel group has {} ranks and model.attention states {}: {}. Fix: {}".format(
            size,
            " and ".join(
                f"{n} {label}" for n, label in ((count, "attention heads"), (kv_count, "KV heads")) if n is not None
            ),
            "; ".join(_tp.heads_fit(count, kv_count, size)),
            fix,
        ),
    )


@rule("tp_per_node_value", pitfall="seed 004: the tighter node being the real budget")
def tp_per_node_value(ctx):
    """Refuse per-node values on Ray workers that only ``vllm serve`` reads (the head's argv holds for all)."""
    if not ctx.tensor_parallel:
        return
    group = ctx.group_limits
    for worker, key, value in _tp.worker_values(ctx.profile, ctx.workers):
        flag, why = _tp.HEAD_ONLY[key]
        group_value, set_by = _tp.group_setting(ctx.profile, ctx.head, key)
        if key == "gpu_memory_utilization" and group.get("max_share") is not None:
            fix = "; at most {} keeps every rank at its margin here (the tighter node is the real budget)".format(
                _fmt(group["max_share"])
            )
        else:
            fix = ""
        yield violation(
            worker,
            "tp_per_node_value",
            value,
            f"nodes.{worker}.{key} is {value!r}, but {worker} is a rank of the tensor-parallel group whose "
            f"engine follows the head's options: {why} (the head's {flag} is {group_value!r}, from {set_by}), so "
            f"this value changes nothing on {worker}. Remove nodes.{worker}.{key} and set the group's one value "
            f"in {set_by}{fix}",
        )
