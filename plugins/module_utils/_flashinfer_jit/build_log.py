# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Reading a build log: an OOM kill presents as something else (seed 004 pitfall 2)."""

from __future__ import annotations

import re

from ansible_collections.gb10.serving.plugins.module_utils import _earlyoom

# Processes of the CUDA/C++ toolchain that a JIT build runs; an OOM kill of one of them is a build casualty.
COMPILER_PROCESSES = (
    "cicc",
    "ptxas",
    "cudafe++",
    "nvcc",
    "fatbinary",
    "nvlink",
    "cc1plus",
    "cc1",
    "c++",
    "g++",
    "gcc",
    "ld",
    "collect2",
    "ninja",
)

_STEP_RE = re.compile(r"^\s*\[\d+/\d+\]\s")

_FAILED_RE = re.compile(r"^FAILED:\s*(?:\[code=(?P<code>\d+)\]\s*)?(?P<target>.*)$")

_DIAGNOSTIC_RE = re.compile(
    r"(\berror\b\s*:|\bfatal error\b|nvcc fatal|errors? detected in the compilation"
    r"|cannot find -l|undefined reference to)",
    re.IGNORECASE,
)

_TERMINATED_RE = re.compile(r"^\s*compilation terminated\.\s*$", re.IGNORECASE)

_SIGNAL_RE = re.compile(
    r"(died due to signal (?P<nvcc_sig>\d+)|Killed signal terminated program (?P<gcc_prog>\S+)|^\s*Killed\s*$)"
)

_KERNEL_OOM_RE = re.compile(r"(?:Out of memory|oom-kill).*?Killed process (?P<pid>\d+) \((?P<name>[^)]+)\)")

_SIGNAL_EXIT_CODES = {137: "SIGKILL", 143: "SIGTERM"}


def _failed_blocks(lines):
    blocks = []
    current = None
    for line in lines:
        m = _FAILED_RE.match(line)
        if m:
            current = {"target": m.group("target").strip(), "code": m.group("code"), "lines": []}
            blocks.append(current)
            continue
        if current is not None and (_STEP_RE.match(line) or line.startswith("ninja: ")):
            current = None
            continue
        if current is not None:
            current["lines"].append(line)
    return blocks


def _classify_block(block):
    body = block["lines"]
    code = int(block["code"]) if block["code"] else None
    diagnostics = [line.strip() for line in body if _DIAGNOSTIC_RE.search(line)]
    signalled = [line.strip() for line in body if _SIGNAL_RE.search(line)]
    terminated = any(_TERMINATED_RE.match(line) for line in body)
    if code in _SIGNAL_EXIT_CODES or signalled:
        why = f"exit code {code} ({_SIGNAL_EXIT_CODES[code]})" if code in _SIGNAL_EXIT_CODES else signalled[0]
        return "oom_kill", why
    if diagnostics:
        return "compile_error", diagnostics[0]
    if terminated:
        return "oom_kill", "'Compilation terminated.' with no compiler diagnostic: the compiler was killed by a signal"
    return "failed", f"exit code {code}" if code is not None else "no reason printed"


def classify_build_log(build_lines, journal_lines=()):
    """Classify a FlashInfer/ninja build log, with the earlyoom (or kernel) lines that name a killed process.

    Returns a dict: ``kind`` ("ok", "oom_kill", "compile_error", "failed"), ``steps`` (per failed ninja step:
    target, kind, why), ``kills`` (earlyoom's (signal, pid, name) and the kernel OOM killer's victims),
    ``compiler_kills`` (those of them that are toolchain processes) and ``message`` (one paragraph for the operator).
    """
    build_lines = list(build_lines)
    journal_lines = list(journal_lines)
    steps = []
    for block in _failed_blocks(build_lines):
        kind, why = _classify_block(block)
        steps.append({"target": block["target"], "kind": kind, "why": why})
    if not steps:
        # A log without ninja's FAILED lines (a compiler run alone): judge the whole text.
        kind, why = _classify_block({"target": "", "code": None, "lines": build_lines})
        if kind != "failed":
            steps.append({"target": "", "kind": kind, "why": why})
    kills = [{"signal": s, "pid": p, "name": n, "source": "earlyoom"} for s, p, n in _earlyoom.kills(journal_lines)]
    for m in map(_KERNEL_OOM_RE.search, journal_lines):
        if m:
            kills.append({"signal": "SIGKILL", "pid": int(m.group("pid")), "name": m.group("name"), "source": "kernel"})
    compiler_kills = [k for k in kills if k["name"] in COMPILER_PROCESSES]
    kinds = {s["kind"] for s in steps}
    if "oom_kill" in kinds or (compiler_kills and steps):
        kind = "oom_kill"
    elif "compile_error" in kinds:
        kind = "compile_error"
    elif steps or any(line.startswith("ninja: build stopped") for line in build_lines):
        kind = "failed"
    else:
        kind = "ok"
    return {
        "kind": kind,
        "steps": steps,
        "kills": kills,
        "compiler_kills": compiler_kills,
        "message": _message(kind, steps, kills, compiler_kills),
    }


def _message(kind, steps, kills, compiler_kills):
    if kind == "ok":
        return "build finished"
    if kind == "oom_kill":
        killed = [s for s in steps if s["kind"] == "oom_kill"]
        named = compiler_kills or kills
        who = (
            "; ".join(f"{k['source']} sent {k['signal']} to {k['name']} (pid {k['pid']})" for k in named)
            if named
            else "no earlyoom or kernel OOM line names the process: read journalctl -u earlyoom and the kernel log"
        )
        return (
            f"OUT OF MEMORY, not a compile error: {len(killed)} compile step(s) killed by a signal"
            f" ({killed[0]['why'] if killed else 'a compiler was killed'}). {who}. Build with no model resident and a"
            " lower MAX_JOBS (flashinfer_jit_per_job_peak_mib up, or flashinfer_jit_reserve_mib up)."
        )
    if kind == "compile_error":
        first = next(s for s in steps if s["kind"] == "compile_error")
        return f"compile error in {first['target'] or 'the build'}: {first['why']}"
    return f"build failed: {steps[0]['why'] if steps else 'ninja stopped'}"
