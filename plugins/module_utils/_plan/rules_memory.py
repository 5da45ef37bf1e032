# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Memory rules: each node's share, concurrency, host headroom and KV cache, from its memory table."""

from __future__ import annotations

from .. import _memory
from .context import MIN_SHM_MIB, PRIVATE_SHM_ROLES, judged
from .registry import rule
from .violation import ALL_NODES, violation

_BUDGET = "seed 004: the tighter node being the real budget"


def _fmt(value):
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


@rule("gpu_memory_utilization", pitfall="seed 002: per-node gpu-memory-utilization (0.78 vs 0.74)")
def gpu_memory_utilization(ctx):
    for host in ctx.hosts:
        figures = ctx.per_node[host]
        if figures["share_ok"]:
            continue
        share = figures["share"]
        if ctx.tensor_parallel and figures["role"] in ("ray_head", "tp_head"):
            yield violation(
                host,
                "gpu_memory_utilization",
                share,
                f"the tensor-parallel group's gpu_memory_utilization ({ctx.share_set_by}) is {share!r}: set "
                f"{ctx.share_set_by} to a share between 0 and 0.98, low enough for the tighter node (vLLM applies "
                "the head's value to every rank)",
            )
        elif not ctx.tensor_parallel:
            yield violation(
                host,
                "gpu_memory_utilization",
                share,
                f"gpu_memory_utilization for {host} is {share!r}: set nodes.{host}.gpu_memory_utilization (or "
                "defaults.gpu_memory_utilization) to a share between 0 and 0.98; a node that runs other work "
                "gets less",
            )


@rule("max_num_seqs", pitfall="seed 002: 12 concurrent requests per replica beat 8")
def max_num_seqs(ctx):
    for host in ctx.hosts:
        figures = ctx.per_node[host]
        seqs = figures["max_seqs"]
        if figures["serves"] and (isinstance(seqs, bool) or not isinstance(seqs, int) or seqs < 1):
            yield violation(
                host,
                "max_num_seqs",
                seqs,
                f"max_num_seqs for {host} is {seqs!r}: set nodes.{host}.max_num_seqs (or "
                "defaults.max_num_seqs) to the replica's concurrency; the proxy queues the rest",
            )


@rule("memory_headroom", pitfall=_BUDGET)
def memory_headroom(ctx):
    group = ctx.group_limits
    for host, figures in judged(ctx).items():
        table = figures["table"]
        if table["headroom_gib"] >= ctx.margin:
            continue
        share = table["gpu_memory_utilization"]
        if group is None:
            best = _memory.max_share(
                figures["available"], figures["reserve"] + figures["shm"], ctx.margin, figures["total"]
            )
            fix = (
                f"Lower nodes.{host}.gpu_memory_utilization to {_fmt(best)} or less "
                "(judged on this node's own figures; the tighter node is the real budget)"
            )
        else:
            fix = (
                "vLLM applies the head's --gpu-memory-utilization {share} to every rank, so lower the group's value "
                "({set_by}) to {best} or less (every rank judged on its own figures; the tighter node is the real "
                "budget)".format(share=share, set_by=group["set_by"], best=_fmt(group["max_share"]))
            )
        yield violation(
            host,
            "memory_headroom",
            table["headroom_gib"],
            "{host} keeps {headroom} GiB for the host: MemAvailable {available} GiB - other work {reserve} GiB "
            "- vLLM budget {budget} GiB ({share} x {total} GiB) - the engine's /dev/shm {shm} GiB is below the "
            "margin {margin} GiB. {fix}".format(
                host=host,
                headroom=_fmt(table["headroom_gib"]),
                available=_fmt(figures["available"]),
                reserve=_fmt(figures["reserve"]),
                budget=_fmt(table["budget_gib"]),
                share=share,
                total=_fmt(figures["total"]),
                shm=_fmt(table["shm_gib"]),
                margin=_fmt(ctx.margin),
                fix=fix,
            ),
        )


@rule(
    "engine_shm_size",
    pitfall="issue 39: Docker's /dev/shm is carved from the same unified memory; vLLM's queues need 160 MiB of it",
)
def engine_shm_size(ctx):
    """The engine container's /dev/shm (memory.shm_size): a Docker size, and where the engine has a private one (a
    replica, each rank of the mp launcher) at least what vLLM's shared-memory queue takes (MIN_SHM_MIB)."""
    given = ctx.shm_size_given
    if ctx.shm_mib is None:
        yield violation(
            ALL_NODES,
            "engine_shm_size",
            given,
            f"memory.shm_size is {given!r}: give the engine container's /dev/shm as Docker's --shm-size takes it, a "
            "whole number with b, k, m or g (8g); it is written into the unit and counted in each node's memory "
            "table (the MemAvailable a start is admitted with)",
        )
        return
    hosts = [host for host in ctx.hosts if ctx.per_node[host]["role"] in PRIVATE_SHM_ROLES]
    if hosts and ctx.shm_mib < MIN_SHM_MIB:
        yield violation(
            ALL_NODES,
            "engine_shm_size",
            given,
            f"memory.shm_size {given} ({ctx.shm_mib:g} MiB) is below the {MIN_SHM_MIB} MiB vLLM's shared-memory "
            f"queue takes in the engine's private /dev/shm on {', '.join(hosts)} (measured on vLLM 0.32: "
            f'"Insufficient space in /dev/shm ... 160 MiB required, 64 MiB free" refused the start). Fix: '
            "memory.shm_size 1g or more (the default 8g)",
        )


def _no_kv_room(table):
    return table["kv_cache_gib"] <= 0 or table["kv_cache_gib"] > table["kv_room_gib"]


@rule("memory_kv_budget", pitfall="seed 004: speculative decoding trading KV budget")
def memory_kv_budget(ctx):
    for host, figures in judged(ctx).items():
        table = figures["table"]
        if not _no_kv_room(table):
            continue
        spec_note = (
            " (speculative decoding is on: its drafter's {} GiB comes out of the KV budget)".format(
                _fmt(table["drafter_gib"])
            )
            if ctx.spec_config
            else ""
        )
        yield violation(
            host,
            "memory_kv_budget",
            table["kv_cache_gib"],
            "{} has no room for the KV cache{}: budget {} GiB - weights {} GiB - drafter {} GiB - activation "
            "reserve {} GiB = {} GiB{}. Raise gpu_memory_utilization (if headroom allows), shrink the drafter "
            "or turn speculative decoding off, or use a smaller checkpoint".format(
                host,
                spec_note,
                _fmt(table["budget_gib"]),
                _fmt(table["weights_gib"]),
                _fmt(table["drafter_gib"]),
                _fmt(table["activation_reserve_gib"]),
                _fmt(table["kv_room_gib"]),
                ""
                if table["kv_cache_source"] == "computed"
                else ", but --kv-cache-memory-bytes asks for {} GiB".format(_fmt(table["kv_cache_gib"])),
            ),
        )


@rule("memory_kv_context", pitfall="seed 004: the context ladder with abort criteria")
def memory_kv_context(ctx):
    group = ctx.group_limits
    for host, figures in judged(ctx).items():
        table = figures["table"]
        if (
            _no_kv_room(table)
            or table["kv_tokens"] is None
            or not ctx.context_length
            or table["kv_tokens"] >= ctx.context_length
            or (group is not None and host != group.get("kv_rank"))  # tensor-parallel: once, for the group
        ):
            continue
        yield violation(
            host,
            "memory_kv_context",
            table["kv_tokens"],
            f"{host}'s KV cache of {_fmt(table['kv_cache_gib'])} GiB holds {table['kv_tokens']} tokens"
            + ("" if group is None else ", the group's (vLLM sizes every rank's cache by its smallest rank)")
            + f", fewer than one request at context_length {ctx.context_length}: vLLM refuses to start. Lower "
            f"context_length to {table['kv_tokens']} or less, or free memory for the KV cache",
        )
