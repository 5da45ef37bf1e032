# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Admit an engine start by what the node has available now, not what is free (issue 39, item 2).

On GB10's unified memory the page cache and the node's other tenants decide whether a load fits, and vLLM's
``--gpu-memory-utilization`` is a share of the whole pool that is not a hard cap while vLLM profiles
(vllm-project/vllm#46307, the open fix vllm-project/vllm#49760: "the CPU/OS and the GPU share one physical memory
pool, so gpu_memory_utilization does not reserve any memory for the OS"; a GB10 driven to ~7 GiB available during
profile_run wedged and needed a power cycle). So right before the collection starts an engine, the node's
``MemAvailable`` (the kernel's estimate of what can be allocated without swapping, page cache it can drop included;
never ``MemFree``, which counts the page cache as used, nor free + buffers + cached, which counts shared memory and
unreclaimable cache as free) is held to what the plan says this engine takes on this node:

    need = vLLM budget (share x MemTotal) + the engine's /dev/shm + other work's reserve + the plan's margin

Short of it, the start is refused with the node, the numbers and the processes that hold the memory. Pure functions
over /proc/meminfo's text and a process list; plugins/modules/engine_memory_admission.py reads them on the node.
"""

from __future__ import annotations

from pathlib import Path

KIB_PER_MIB = 1024
MIB_PER_GIB = 1024


def meminfo(text):
    """/proc/meminfo as {key: MiB} (its kB are KiB)."""
    found = {}
    for line in (text or "").splitlines():
        key, sep, rest = line.partition(":")
        if not sep:
            continue
        parts = rest.split()
        if parts and parts[0].isdigit():
            found[key.strip()] = int(parts[0]) / KIB_PER_MIB
    return found


def parse_size_mib(value):
    """A Docker size (``8g``, ``512m``, ``1024k``, bytes) in MiB."""
    text = str(value).strip().lower()
    units = {"b": 1 / (1024 * 1024), "k": 1 / 1024, "m": 1.0, "g": 1024.0}
    if text and text[-1] in units:
        number, unit = text[:-1], text[-1]
    else:
        number, unit = text, "b"
    try:
        return float(number) * units[unit]
    except ValueError:
        raise ValueError(f"{value!r} is not a size (a number with b, k, m or g)") from None


def judged(meminfo_text, stated_mib=None):
    """(figures, measured MiB or None, source words): /proc/meminfo's figures (``meminfo_text``) with MemAvailable
    the inventory's stated figure where one is given (a node whose own view is not the machine's, such as a container
    standing for a GB10), the measured one kept to be said beside it. The engine's start (the module) and the
    watchdog's restart judge alike."""
    figures = meminfo(meminfo_text)
    measured = figures.get("MemAvailable")
    if stated_mib is None or str(stated_mib).strip() == "":
        return figures, measured, "measured"
    seen = "?" if measured is None else _gib(measured)
    return dict(figures, MemAvailable=float(stated_mib)), measured, f"stated in the inventory, measured {seen} GiB"


def read_processes(proc="/proc"):
    """[{pid, name, rss_mib}] of every process under ``proc`` whose status and name are readable (VmRSS: kernel
    threads have none)."""
    found = []
    for entry in Path(proc).iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = meminfo((entry / "status").read_text(encoding="utf-8", errors="replace"))
            name = (entry / "comm").read_text(encoding="utf-8", errors="replace").strip()
        except OSError:
            continue
        if "VmRSS" in status:
            found.append({"pid": int(entry.name), "name": name, "rss_mib": round(status["VmRSS"], 1)})
    return found


def top_consumers(processes, count=5):
    """The ``count`` processes with the most resident memory: ``processes`` [{pid, name, rss_mib}]."""
    ranked = sorted(processes, key=lambda p: (-p["rss_mib"], p["pid"]))
    return ranked[:count]


def _gib(mib):
    return f"{mib / MIB_PER_GIB:.2f}"


def verdict(node, figures, table, shm_mib, top, judged_source="measured"):
    """Whether ``node`` may start its engine now.

    figures: meminfo() of the node (MemAvailable, MemFree, ... in MiB), ``MemAvailable`` possibly stated (a node
    whose own view is not the machine's: ``judged_source`` says which); table: the plan's memory table of this node
    (budget_gib, shm_gib, other_work_reserve_gib, margin_gib, start_need_gib); shm_mib: the engine container's
    /dev/shm where the table holds none (a plan before shm_gib); top: top_consumers().
    Returns {admitted, available_mib, need_mib, parts, message}. The need is the plan's start_need_gib where the
    table states it (never derived again here), else the sum of the parts.
    """
    available = figures.get("MemAvailable")
    shm = float(table["shm_gib"]) * MIB_PER_GIB if table.get("shm_gib") is not None else float(shm_mib or 0)
    parts = {
        "budget_mib": float(table.get("budget_gib") or 0) * MIB_PER_GIB,
        "shm_mib": shm,
        "other_work_reserve_mib": float(table.get("other_work_reserve_gib") or 0) * MIB_PER_GIB,
        "margin_mib": float(table.get("margin_gib") or 0) * MIB_PER_GIB,
    }
    stated = table.get("start_need_gib")
    need = float(stated) * MIB_PER_GIB if stated is not None else sum(parts.values())
    result = {"admitted": False, "available_mib": available, "need_mib": round(need, 1), "parts": parts}
    if available is None:
        result["message"] = (
            f"{node}: no MemAvailable in /proc/meminfo (a kernel before 3.14?): the start cannot be admitted by "
            "what the node has available. Fix: run a kernel that reports MemAvailable"
        )
        return result
    arithmetic = (
        "MemAvailable {avail} GiB ({source}; MemFree {free} GiB, page cache {cached} GiB) against the plan's need "
        "{need} GiB = vLLM budget {budget} GiB + /dev/shm {shm} GiB + other work {reserve} GiB + margin {margin} GiB"
    ).format(
        avail=_gib(available),
        source=judged_source,
        free=_gib(figures.get("MemFree", 0)),
        cached=_gib(figures.get("Cached", 0)),
        need=_gib(need),
        budget=_gib(parts["budget_mib"]),
        shm=_gib(parts["shm_mib"]),
        reserve=_gib(parts["other_work_reserve_mib"]),
        margin=_gib(parts["margin_mib"]),
    )
    if available >= need:
        result.update(admitted=True, message=f"{node}: engine start admitted: {arithmetic}")
        return result
    holders = ", ".join(f"{p['name']} (pid {p['pid']}) {_gib(p['rss_mib'])} GiB" for p in top) or "none readable"
    result["message"] = (
        f"{node}: engine start refused, {_gib(need - available)} GiB short: {arithmetic}. On unified memory vLLM's "
        "share is not a hard cap while it profiles (vllm-project/vllm#46307, #49760): a start short of it can wedge "
        f"the host. What holds the memory now: {holders}. Fix: stop or move that work, drop the page cache before "
        "the load (serving_drop_caches: true), or lower the node's gpu_memory_utilization in the profile"
    )
    return result
