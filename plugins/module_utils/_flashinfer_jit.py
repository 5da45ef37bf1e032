# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""FlashInfer JIT prebuild: compile-job sizing, build-option refusals, build-log reading, cache layout and stamp.

Pure functions over plain data, tested in tests/unit/plugins/module_utils/test_flashinfer_jit.py. Every rule is
taken from the source of the pinned flashinfer-python release (0.6.18) and from seed 004 (pitfall 2, pitfall 7,
"The CUTLASS saga"):

- cache layout (``flashinfer/jit/env.py``): ``$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/<version>/<archs>/``
  with ``cached_ops/<module>/{build.ninja,*.o,<module>.so}`` and ``generated/``; ``<archs>`` joins the sorted
  target archs, each ``<major><minor><suffix>`` (``90a`` for sm90, ``121a`` for GB10's sm121, ``120f`` for sm120).
- module name (``flashinfer/fused_moe/core.py`` ``get_cutlass_fused_moe_module``): the backend is
  ``major * 10 + minor``; 120 and 121 both build ``fused_moe_120``, 100/107/110 build ``fused_moe_100``.
- debug build (``flashinfer/jit/core.py`` ``gen_jit_spec``): ``FLASHINFER_JIT_DEBUG`` when set, else
  ``FLASHINFER_JIT_VERBOSE``, equal to ``"1"`` makes ``-g -O0 --device-debug -lineinfo``.
- ``MAX_JOBS`` (``flashinfer/jit/cpp_ext.py`` ``_get_num_workers``): used as ``ninja -j`` only when it is all
  digits; anything else is silently ignored and ninja runs one job per core plus two.
"""

import hashlib
import json
import math
import os
import re

from ansible_collections.gb10.serving.plugins.module_utils import _earlyoom

MIB_PER_GIB = 1024

# Per-compiler-job RSS measured, MiB, by the CPU architecture of the building host (docs/flashinfer-jit.md):
# (MiB, "peak" for the worst of a whole sampled build, "lower bound" for a reading of one process that was killed while
# it ran, where it had not necessarily peaked, and the provenance).
MEASURED_PER_JOB_MIB = {
    "x86_64": (
        10605,
        "peak",
        "worst cicc 10605 MiB of flashinfer 0.6.18 fused_moe_120 (sm_121a, 97 build statements, MAX_JOBS=16)"
        " built on an x86-64 H200 host with nvcc 13.0 (issue 17; p90 7726, median 874 MiB; sm90 fused_moe_90"
        " there: 9606 MiB)",
    ),
    "aarch64": (
        5284,
        "lower bound",
        "seed 004, GB10 (aarch64): one cicc's VmRSS in earlyoom's SIGTERM line, killed at object 20 of 97",
    ),
}
# The worst figure measured as a peak on any host: fused_moe_120's cicc on x86-64 (sm90's worst was 9606 MiB).
DEFAULT_PER_JOB_PEAK_MIB = max(mib for mib, kind, _source in MEASURED_PER_JOB_MIB.values() if kind == "peak")
DEFAULT_PER_JOB_PEAK_SOURCE = MEASURED_PER_JOB_MIB["x86_64"][2]
DEFAULT_RESERVE_MIB = 8192

STAMP_NAME = "gb10-prebuild.json"
# The options of the modules that judge an image's stamps in a node's cache (doc fragment
# gb10.serving.flashinfer_stamps and gb10.serving.node document them; the three change together).
STAMPS_ARGUMENT_SPEC = {
    "node": {"type": "str", "required": True},
    "cache_dir": {"type": "path", "required": True},
    "image": {"type": "str", "required": True},
}
LOG_NAME = "gb10-prebuild.log"

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


class FlashinferJitError(ValueError):
    """An input that cannot describe a real node or build."""


def max_jobs(cores, mem_available_mib, reserve_mib=DEFAULT_RESERVE_MIB, per_job_peak_mib=DEFAULT_PER_JOB_PEAK_MIB):
    """MAX_JOBS = min(cores, floor((MemAvailable - reserve) / per-job peak RSS)), with the arithmetic as text.

    Returns a dict: ``jobs`` (0 when not even one job fits), ``limited_by`` ("cores", "memory" or "nothing fits"),
    ``arithmetic`` (one printable line) and ``problem`` (None, or why no build may start).
    """
    for name, value in (
        ("cores", cores),
        ("mem_available_mib", mem_available_mib),
        ("per_job_peak_mib", per_job_peak_mib),
    ):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            raise FlashinferJitError(f"{name} must be a positive number, got {value!r}")
    if not isinstance(reserve_mib, (int, float)) or isinstance(reserve_mib, bool) or reserve_mib < 0:
        raise FlashinferJitError(f"reserve_mib must be a number >= 0, got {reserve_mib!r}")
    cores = int(cores)
    usable = mem_available_mib - reserve_mib
    by_memory = max(0, math.floor(usable / per_job_peak_mib))
    jobs = min(cores, by_memory)
    if jobs == 0:
        limited_by = "nothing fits"
    elif by_memory < cores:
        limited_by = "memory"
    else:
        limited_by = "cores"
    arithmetic = (
        f"MAX_JOBS = min(cores {cores}, floor((MemAvailable {mem_available_mib:.0f} MiB"
        f" - reserve {reserve_mib:.0f} MiB)"
        f" / per-job peak {per_job_peak_mib:.0f} MiB) = floor({usable:.0f} / {per_job_peak_mib:.0f}) = {by_memory})"
        f" = {jobs} (limited by {limited_by}); worst case {jobs} x {per_job_peak_mib:.0f} MiB"
        f" = {jobs * per_job_peak_mib:.0f} MiB of {max(usable, 0):.0f} MiB usable"
    )
    problem = None
    if jobs == 0:
        problem = (
            f"not even one compile job fits: MemAvailable {mem_available_mib:.0f} MiB - reserve {reserve_mib:.0f} MiB"
            f" < per-job peak {per_job_peak_mib:.0f} MiB. Stop what holds the memory (a loaded model?) and build"
            " with no model resident (seed 004, the CUTLASS saga)."
        )
    return {"jobs": jobs, "limited_by": limited_by, "arithmetic": arithmetic, "problem": problem}


def default_per_job_peak(machine):
    """(MiB, why): the per-job figure for a node whose CPU architecture is machine (os.uname().machine).

    The worst figure measured for that architecture; where that is only a lower bound (aarch64: seed 004's 5284 MiB
    was a cicc killed before it finished) or nothing was measured there, the worst peak measured on any host for the
    same module, since cicc compiles the same kernels for the same GPU target whatever CPU runs it.
    """
    measured = MEASURED_PER_JOB_MIB.get(str(machine))
    if measured and measured[1] == "peak":
        return measured[0], f"{machine}: {measured[2]}"
    if measured:
        chosen = max(measured[0], DEFAULT_PER_JOB_PEAK_MIB)
        return chosen, (
            f"{machine}: {chosen} MiB, the worst peak measured on any host ({DEFAULT_PER_JOB_PEAK_SOURCE}), because the"
            f" only {machine} figure, {measured[0]} MiB ({measured[2]}), is a lower bound"
        )
    return DEFAULT_PER_JOB_PEAK_MIB, (
        f"{machine}: nothing measured on this architecture; the worst peak measured on any host"
        f" ({DEFAULT_PER_JOB_PEAK_SOURCE})"
    )


def is_debug_build(env):
    """True when flashinfer 0.6.18's gen_jit_spec would compile with -g -O0 --device-debug for this environment."""
    env = env or {}
    debug = env.get("FLASHINFER_JIT_DEBUG")
    chosen = debug if debug is not None else env.get("FLASHINFER_JIT_VERBOSE", "0")
    return str(chosen) == "1"


def env_problems(env):
    """Refusals for a build environment: a silent debug build, a MAX_JOBS that flashinfer ignores."""
    env = env or {}
    problems = []
    if is_debug_build(env):
        if env.get("FLASHINFER_JIT_DEBUG") is None:
            problems.append(
                "FLASHINFER_JIT_VERBOSE=1 without FLASHINFER_JIT_DEBUG=0 is silently a DEBUG build in flashinfer"
                " (gen_jit_spec falls back to FLASHINFER_JIT_VERBOSE when FLASHINFER_JIT_DEBUG is unset): -g -O0"
                " --device-debug -lineinfo, which ran a 128 GB machine out of memory (cicc up to 21 GB, ptxas up to"
                " 33 GB). Set FLASHINFER_JIT_DEBUG=0 beside it, or drop FLASHINFER_JIT_VERBOSE."
            )
        else:
            problems.append(
                "FLASHINFER_JIT_DEBUG=1 asks for a debug build (-g -O0 --device-debug -lineinfo): the module vLLM"
                " loads is the release build (-O3 -DNDEBUG), and the debug build ran a 128 GB machine out of memory."
                " Set FLASHINFER_JIT_DEBUG=0."
            )
    max_jobs_value = env.get("MAX_JOBS")
    if max_jobs_value is not None and not str(max_jobs_value).isdigit():
        problems.append(
            f"MAX_JOBS={max_jobs_value!r} is not all digits: flashinfer ignores it and ninja runs one job per core"
            " plus two, the memory bomb of seed 004 pitfall 7."
        )
    elif max_jobs_value is not None and int(str(max_jobs_value)) == 0:
        problems.append("MAX_JOBS=0 means no limit to ninja (-j 0): give a positive number.")
    return problems


# ---------------------------------------------------------------------------------------------------------------------
# Which module vLLM asks for, and where flashinfer keeps it


def _capability(compute_capability):
    text = str(compute_capability).strip()
    m = (
        re.fullmatch(r"(\d+)\.(\d+)", text)
        or re.fullmatch(r"sm_?(\d)(\d)", text)
        or re.fullmatch(r"sm_?(\d\d)(\d)", text)
    )
    if not m:
        raise FlashinferJitError(f"compute capability must look like '12.1' or 'sm121', got {compute_capability!r}")
    return int(m.group(1)), int(m.group(2))


def arch_dir(compute_capability):
    """flashinfer's per-arch cache folder for one GPU (CompilationContext._normalize_cuda_arch, CUDA >= 12.9)."""
    major, minor = _capability(compute_capability)
    if major == 9:
        suffix = f"{minor}a"
    elif major == 12:
        suffix = "0f" if minor == 0 else f"{minor}a"
    elif major >= 10:
        suffix = f"{minor}a"
    else:
        suffix = f"{minor}"
    return f"{major}{suffix}"


_MOE_MODULES = {
    "120": "fused_moe_120",
    "121": "fused_moe_120",
    "103": "fused_moe_103",
    "100": "fused_moe_100",
    "107": "fused_moe_100",
    "110": "fused_moe_100",
    "90": "fused_moe_90",
    "89": "fused_moe_89",
}


def moe_backend(compute_capability):
    major, minor = _capability(compute_capability)
    return f"{major * 10 + minor}"


def moe_module_name(compute_capability):
    """The CUTLASS fused-MoE JIT module get_cutlass_fused_moe_module builds for this GPU."""
    backend = moe_backend(compute_capability)
    if backend not in _MOE_MODULES:
        raise FlashinferJitError(f"flashinfer has no CUTLASS fused-MoE module for sm{backend}")
    return _MOE_MODULES[backend]


def cache_paths(workspace_base, flashinfer_version, compute_capability, module=None):
    """Paths inside a FLASHINFER_WORKSPACE_BASE for the fused-MoE module of one arch (strings, posix)."""
    module = module or moe_module_name(compute_capability)
    base = str(workspace_base).rstrip("/")
    workspace = f"{base}/.cache/flashinfer/{flashinfer_version}/{arch_dir(compute_capability)}"
    build_dir = f"{workspace}/cached_ops/{module}"
    return {
        "workspace": workspace,
        "build_dir": build_dir,
        "library": f"{build_dir}/{module}.so",
        "ninja": f"{build_dir}/build.ninja",
        "stamp": f"{build_dir}/{STAMP_NAME}",
        "log": f"{build_dir}/{LOG_NAME}",
        "module": module,
    }


def stamp(image_digest, flashinfer_version, compute_capability, library_sha256, max_jobs_used, seconds, **identity):
    """The record written beside a finished module: what it was built for and by what.

    identity: ninja_sha256 (the build.ninja the prebuild wrote) and ninja_log_summary's figures, as the prebuild
    entry point records them.
    """
    return identity | {
        "image_digest": image_digest,
        "flashinfer_version": flashinfer_version,
        "arch": arch_dir(compute_capability),
        "compute_capability": "{}.{}".format(*_capability(compute_capability)),
        "module": moe_module_name(compute_capability),
        "library_sha256": library_sha256,
        "max_jobs": max_jobs_used,
        "build_seconds": seconds,
    }


_UNSET = object()


def cache_state(wanted, found_stamp, library_sha256, ninja_sha256=_UNSET):
    """Is the module in the cache for (image digest, flashinfer version, arch)?

    ``wanted``: dict with image_digest, flashinfer_version, compute_capability. ``found_stamp``: the parsed stamp or
    None. ``library_sha256``: the .so's checksum, or None when the file is missing. ``ninja_sha256``: the checksum
    of the build.ninja on the node (None when missing); given, the stamp must record the same (issue 17: the build's
    own identity; the serving unit's is compared afterwards, in its own container). Returns (present, reason).
    """
    # A prebuilt stamp (issue 38 item 4): the module lives in the image (its digest pins the bytes), not the cache.
    prebuilt = bool(found_stamp) and found_stamp.get("kind") == "prebuilt"
    if library_sha256 is None and not prebuilt:
        return False, "the module library is not in the cache"
    if not found_stamp:
        return False, "the module library is there but carries no prebuild stamp (built by someone else, or cut short)"
    expect = {
        "image_digest": wanted["image_digest"],
        "flashinfer_version": wanted["flashinfer_version"],
        "arch": arch_dir(wanted["compute_capability"]),
        "module": moe_module_name(wanted["compute_capability"]),
    }
    for key, value in expect.items():
        if found_stamp.get(key) != value:
            return False, f"stamp {key} is {found_stamp.get(key)!r}, wanted {value!r}"
    if prebuilt:
        paths = ", ".join(item.get("path", "?") for item in found_stamp.get("aot") or [])
        if not paths:
            return False, "the prebuilt stamp names no prebuilt module: the prebuild re-checks the image"
        return True, f"{expect['module']} prebuilt in the image ({paths}), {expect['image_digest']}"
    if found_stamp.get("library_sha256") != library_sha256:
        return False, "the module library changed since it was stamped"
    if ninja_sha256 is not _UNSET:
        if not found_stamp.get("ninja_sha256"):
            return False, "the stamp records no build.ninja sha256 (stamped before issue 17): the prebuild re-checks it"
        if found_stamp["ninja_sha256"] != ninja_sha256:
            return False, "build.ninja changed since the prebuild (a process with another environment rewrote it)"
    return (
        True,
        f"{expect['module']} for {expect['arch']}, flashinfer {expect['flashinfer_version']}, {expect['image_digest']}",
    )


def _aot_key(artifacts):
    return sorted((item.get("provider"), item.get("path"), item.get("sha256")) for item in artifacts or [])


# ---------------------------------------------------------------------------------------------------------------------
# Reading a build log: an OOM kill presents as something else (seed 004 pitfall 2)

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


# ---------------------------------------------------------------------------------------------------------------------
# The build's own identity (issue 17): flashinfer 0.6.18 always runs ninja before loading a JIT module, and ninja
# rebuilds every unit whose command changed. So the cache is "present" for a serving process only when the
# build.ninja that process writes (generate_ninja_build_for_op of its own environment: CC, CXX, CUDA_HOME,
# FLASHINFER_* variables, the arch list, include paths, the cache's container path) is the prebuild's, byte for byte.

NINJA_DIFF_LINES = 40


def sha256_text(text):
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def ninja_log_entries(text):
    """ninja's .ninja_log (v5/v6): one (start_ms, end_ms, output) per unit ninja ran, in the order it ran them."""
    entries = []
    for line in (text or "").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) < 4 or not fields[0].isdigit() or not fields[1].isdigit():
            continue
        entries.append((int(fields[0]), int(fields[1]), fields[3]))
    return entries


def ninja_log_summary(text):
    """What the stamp keeps of .ninja_log: its line count and sha256, and the slowest unit (the stall yardstick)."""
    entries = ninja_log_entries(text)
    worst = max(entries, key=lambda e: e[1] - e[0], default=None)
    return {
        "ninja_log_lines": len((text or "").splitlines()),
        "ninja_log_sha256": sha256_text(text or ""),
        "worst_unit_seconds": round((worst[1] - worst[0]) / 1000.0, 1) if worst else 0.0,
        "worst_unit": worst[2].rsplit("/", 1)[-1] if worst else "",
        "steps": len(entries),
    }


def ninja_diff(prebuilt_text, serving_text, limit=NINJA_DIFF_LINES):
    """A unified diff (no context) of the prebuild's build.ninja against the serving process's, trimmed to limit."""
    import difflib

    lines = list(
        difflib.unified_diff(
            (prebuilt_text or "").splitlines(),
            (serving_text or "").splitlines(),
            "build.ninja (prebuild)",
            "build.ninja (serving unit)",
            n=0,
            lineterm="",
        )
    )
    if len(lines) > limit:
        lines = [*lines[:limit], f"... {len(lines) - limit} more diff lines"]
    return lines


def ninja_identity(node, stamp_data, prebuilt_text, serving_text, serving_aot=None):
    """Is the serving unit's build.ninja the prebuild's? Returns {same, diff, message}.

    stamp_data: the prebuild stamp (its ninja_sha256 is what was built); prebuilt_text: the build.ninja on the node's
    cache (None when missing); serving_text: what generate_ninja_build_for_op gives in the serving unit's environment;
    serving_aot: the prebuilt modules the serving process would load without a build (the entry point's ``aot``).
    flashinfer loads a prebuilt module before it runs ninja (0.7 JitSpecNvcc.try_load), so the prebuilt modules are
    compared first: the stamp's (none for a module the prebuild built) must be the serving process's.
    """
    stamp_data = stamp_data or {}
    stamped_aot, serving_aot = _aot_key(stamp_data.get("aot")), _aot_key(serving_aot)
    if stamped_aot != serving_aot:
        return {"same": False, "diff": [], "message": _aot_message(node, stamp_data, stamped_aot, serving_aot)}
    if stamped_aot:
        paths = ", ".join(path for _provider, path, _sha in stamped_aot)
        return {"same": True, "diff": [], "message": f"{node}: the serving unit loads the prebuilt {paths}"}
    wanted = stamp_data.get("ninja_sha256")
    got = sha256_text(serving_text or "")
    if wanted and got == wanted:
        return {"same": True, "diff": [], "message": f"{node}: the serving unit writes the prebuild's build.ninja"}
    if not wanted:
        why = "the prebuild stamp records no build.ninja sha256 (a stamp from before issue 17)"
    else:
        why = f"sha256 {got[:12]} differs from the prebuild's {wanted[:12]}"
    diff = ninja_diff(prebuilt_text, serving_text) if prebuilt_text is not None else []
    body = [line for line in diff if not line.startswith(("+++", "---", "@@"))]
    changed = max(sum(line[:1] == "-" for line in body), sum(line[:1] == "+" for line in body))
    return {
        "same": False,
        "diff": diff,
        "message": (
            f"{node}: the serving unit would rebuild {stamp_data.get('module', 'the module')} at its first MoE"
            f" forward, beside the weights (seed 004, the CUTLASS saga): the build.ninja its environment writes"
            f" differs from the prebuild's ({why}; {changed} line(s) differ). Every variable that reaches"
            " build.ninja (CC, CXX, CUDA_HOME, FLASHINFER_*, the arch list, the cache's container path) must be"
            " the same for the prebuild and the serving unit: set it in the plan's env of the node (the profile's"
            " env, which both get), not in flashinfer_jit_env or serving_secrets alone. No serving unit was started."
        ),
    }


def _aot_message(node, stamp_data, stamped, serving):
    module = stamp_data.get("module", "the module")
    if not serving:
        what = (
            f"the prebuild found {module} prebuilt in the image ({', '.join(p for _v, p, _s in stamped)}) but the"
            " serving unit's environment does not reach it, so the serving call would build it beside the weights"
            " (seed 004, the CUTLASS saga)"
        )
    elif not stamped:
        what = (
            f"the serving unit would load a prebuilt {module} ({', '.join(p for _v, p, _s in serving)}) that the"
            " prebuild's environment did not see: the module the prebuild built and checked is not the one served"
        )
    else:
        what = f"the serving unit would load other prebuilt modules ({serving}) than the prebuild stamped ({stamped})"
    return (
        f"{node}: {what}. The prebuild and the serving unit must see the same FlashInfer JIT-cache packages and"
        " FLASHINFER_* variables: set them in the plan's env of the node or the image, not in one of the two alone."
        " No serving unit was started."
    )


def rebuild_findings(stamp_data, ninja_log_text, library_sha256):
    """What changed in a module's build folder since its prebuild: [] when nothing was rebuilt.

    A rebuild appends to .ninja_log (one line per unit ninja ran) and replaces the .so; a load with nothing to do
    changes neither.
    """
    stamp_data = stamp_data or {}
    findings = []
    lines = (ninja_log_text or "").splitlines()
    recorded = stamp_data.get("ninja_log_lines")
    if recorded is None:
        return ["the prebuild stamp records no .ninja_log line count (a stamp from before issue 17)"]
    if len(lines) != recorded or sha256_text(ninja_log_text or "") != stamp_data.get("ninja_log_sha256"):
        new = ninja_log_entries("\n".join(lines[recorded:])) if len(lines) > recorded else []
        names = [entry[2].rsplit("/", 1)[-1] for entry in new]
        shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
        findings.append(
            f".ninja_log has {len(lines)} lines, {recorded} at the prebuild"
            + (f": {len(new)} unit(s) rebuilt ({shown})" if new else " (rewritten)")
        )
    if library_sha256 is None:
        findings.append(f"{stamp_data.get('module', 'the module')}.so is gone")
    elif library_sha256 != stamp_data.get("library_sha256"):
        findings.append(
            f"{stamp_data.get('module', 'the module')}.so sha256 {library_sha256[:12]}, the prebuild's"
            f" {str(stamp_data.get('library_sha256'))[:12]}"
        )
    return findings


# ---------------------------------------------------------------------------------------------------------------------
# Progress of a running build, from ninja's "[k/N]" lines

_PROGRESS_RE = re.compile(r"^\s*\[(?P<k>\d+)/(?P<n>\d+)\]")


def _minutes(seconds):
    seconds = int(max(0, seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s"


def build_progress(log_lines, elapsed_s, since_progress_s, stall_s, last_build=None):
    """One line on a build under way: ninja's [k/N], elapsed, an estimate; stalled when [k/N] has not moved for stall_s.

    last_build: {"seconds", "steps", "node"} of the cluster's last finished build of this module (its stamp), or None.
    since_progress_s: seconds since the log last showed a new [k/N].
    """
    k = n = 0
    for line in log_lines:
        m = _PROGRESS_RE.match(line)
        if m:
            k, n = int(m.group("k")), int(m.group("n"))
    if last_build and last_build.get("seconds"):
        total = float(last_build["seconds"])
        source = f"last build {_minutes(total)}" + (f" on {last_build['node']}" if last_build.get("node") else "")
        left = max(0.0, total - elapsed_s)
        estimate = f"about {_minutes(left)} left ({source})"
    elif k and n:
        left = elapsed_s / k * (n - k)
        estimate = f"about {_minutes(left)} left (at this build's pace; no earlier build to go by)"
    else:
        estimate = "no estimate yet (no earlier build, no step finished)"
    step = f"[{k}/{n}]" if n else "[0/?] (ninja has printed no step yet)"
    stalled = since_progress_s >= stall_s
    message = f"{step} {_minutes(elapsed_s)} elapsed, {estimate}"
    if stalled:
        message += (
            f"; STALLED: no step finished for {_minutes(since_progress_s)}, more than the worst case of one unit"
            f" ({_minutes(stall_s)})"
        )
    return {"k": k, "n": n, "stalled": stalled, "message": message}


# No build step finished for this long is a stall when nothing better is known: longer than seed 004's whole
# fused_moe_120 build on a GB10 (20-25 minutes at MAX_JOBS 10), since one unit's own worst case was never measured.
STALL_FLOOR_S = 1800


def stall_seconds(stated, last_worst_unit_s, floor_s=STALL_FLOOR_S, factor=3):
    """The no-progress limit: stated when > 0, else factor x the slowest unit of the last build, at least floor_s.

    With MAX_JOBS jobs running, [k/N] stays put at most as long as the slowest single unit takes.
    """
    if stated and stated > 0:
        return int(stated)
    return int(max(floor_s, factor * float(last_worst_unit_s or 0)))


def read_text(path, errors="strict"):
    """A cache file's text; None when it cannot be read (not built yet, removed while we look)."""
    try:
        with open(path, errors=errors) as handle:
            return handle.read()
    except OSError:
        return None


def file_sha256(path):
    """sha256 of a file's bytes, read in 1 MiB chunks (a 64 MB .so); None when there is no such file."""
    if not os.path.isfile(path):
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------------------------------
# Built once per cluster (issue 17): one node of each (image digest, arch, ...) group builds, the others receive its
# cache folder's module files over the fabric (the model_weights role's transfer script, --layout files)

# What reaches build.ninja besides the image and the cache's container path (flashinfer 0.6.18 jit/cpp_ext.py: -ccbin
# $CC, cxx, cuda_home, FLASHINFER_EXTRA_*FLAGS, the launchers, FLASHINFER_CUDA_ARCH_LIST): nodes whose values differ
# write different build.ninja files, so a module built on one would be rebuilt by the other's serving unit.
NINJA_ENV_NAMES = ("CC", "CXX", "CUDA_HOME", "CUDA_PATH")
NINJA_ENV_PREFIX = "FLASHINFER_"
# Never sent: partial files of a transfer or a stamp write, and flashinfer's build locks.
_SHARE_SKIP_SUFFIXES = (".gb10-incomplete", ".tmp", ".lock")


def ninja_env(env):
    """The variables of a node's environment that reach build.ninja, sorted."""
    return {
        key: str(value)
        for key, value in sorted((env or {}).items())
        if key in NINJA_ENV_NAMES or key.startswith(NINJA_ENV_PREFIX)
    }


def share_key(image_digest, flashinfer_version, compute_capability, workspace_base, env):
    """What two nodes must have in common for one's prebuilt module to be the other's: the image digest, flashinfer
    version, arch, the cache's container path (build.ninja holds absolute paths under it) and the build.ninja
    variables. A JSON string, so it compares and travels through hostvars as one value."""
    return json.dumps(
        {
            "image_digest": image_digest,
            "flashinfer_version": flashinfer_version,
            "arch": arch_dir(compute_capability),
            "workspace_base": str(workspace_base).rstrip("/"),
            "env": ninja_env(env),
        },
        sort_keys=True,
        separators=(",", ":"),
    )


def share_roles(nodes):
    """Which node builds the module, which receive it and from where.

    nodes: in inventory order, each {"name", "key" (share_key), "has" (a valid stamp for the key now, or obtained
    earlier in this run), "due" (runs the role now and lacks the module)}. A due node receives from the first node
    of its key that has the module (a node that already serves it keeps serving: the transfer only reads its files);
    with none, the first due node of its key builds and the others receive from it. Returns {name: {"action":
    "present" | "build" | "receive", "source", "key"}} for every node that has or is due.
    """
    roles, builders = {}, {}
    holders = {}
    for node in nodes:
        if node.get("has"):
            holders.setdefault(node["key"], node["name"])
    for node in nodes:
        name, key = node["name"], node["key"]
        if node.get("has"):
            roles[name] = {"action": "present", "source": None, "key": key}
        elif node.get("due"):
            if key in holders:
                roles[name] = {"action": "receive", "source": holders[key], "key": key}
            elif key in builders:
                roles[name] = {"action": "receive", "source": builders[key], "key": key}
            else:
                builders[key] = name
                roles[name] = {"action": "build", "source": None, "key": key}
    return roles


_BUILD_LINE_RE = re.compile(r"^build\s+(?P<outs>.+?)(?<!\$):\s*(?P<rule>\S+)\s*(?P<ins>.*)$")


def ninja_input_dirs(ninja_text, workspace):
    """Folders under ``workspace`` (container paths) that hold inputs of build.ninja's statements: the sources
    flashinfer generates into the cache (``generated/cutlass_instantiations/<arch>``), relative to ``workspace``.

    A receiving node needs them with the builder's mtimes: write_if_different leaves an equal file alone, but a
    missing one is written now, newer than every object, and ninja rebuilds each unit."""
    text = re.sub(r"\$\n\s*", " ", ninja_text or "")
    base = str(workspace).rstrip("/") + "/"
    folders = set()
    for line in text.splitlines():
        match = _BUILD_LINE_RE.match(line)
        if not match:
            continue
        for path in match["ins"].split("||")[0].replace(" | ", " ").split():
            if path.startswith(base):
                folders.add(os.path.dirname(path[len(base) :]))
    return sorted(folder for folder in folders if folder)


def share_file_wanted(relative):
    """Whether a file of the module's folders is part of what is sent."""
    return not os.path.basename(relative).endswith(_SHARE_SKIP_SUFFIXES)


def share_manifest(node, files, stamp_data, module, ninja_text):
    """The manifest a builder sends, checked against its stamp. Returns (manifest, problems).

    files: {path relative to the arch workspace: {"size", "sha256", "mtime_ns"}} of the module's build folder and
    the folders holding its generated inputs. What the serving unit's load needs for "ninja: no work to do": the
    .so and build.ninja the stamp records (by sha256), .ninja_log (the command of every output), .ninja_deps when
    build.ninja has ``deps =`` (without it ninja rebuilds each unit), the objects, the generated sources, the stamp.
    """
    problems = []
    build_dir = f"cached_ops/{module}"
    manifest = {path: dict(entry) for path, entry in sorted((files or {}).items()) if share_file_wanted(path)}
    stamp_data = stamp_data or {}
    need = {
        f"{build_dir}/{module}.so": stamp_data.get("library_sha256"),
        f"{build_dir}/build.ninja": stamp_data.get("ninja_sha256"),
        f"{build_dir}/.ninja_log": None,
        f"{build_dir}/{STAMP_NAME}": None,
    }
    if re.search(r"^\s*deps\s*=", ninja_text or "", re.MULTILINE):
        need[f"{build_dir}/.ninja_deps"] = None
    for path, sha in need.items():
        entry = manifest.get(path)
        if entry is None:
            problems.append(f"{node}: {path} is missing from the module's cache folder")
        elif path.endswith(".ninja_log") and sha256_text("") == entry.get("sha256"):
            problems.append(f"{node}: {path} is empty")
        elif sha is not None and entry.get("sha256") != sha:
            problems.append(
                f"{node}: {path} sha256 {str(entry.get('sha256'))[:12]} differs from the stamp's {str(sha)[:12]}"
            )
    if not stamp_data.get("library_sha256") or not stamp_data.get("ninja_sha256"):
        problems.append(f"{node}: the stamp records no .so or build.ninja sha256 (a stamp from before issue 17)")
    if problems:
        problems.append(
            f"{node} cannot give its {module} to another node: run the flashinfer_jit role on {node} alone first "
            "(it rebuilds a module whose stamp does not hold)"
        )
    return manifest, problems


def share_outcome(node, source, seconds, present, reason):
    """The line a receiving node reports after the copy, and whether it holds (the plan module's verdict on the
    received stamp, .so and build.ninja)."""
    if present:
        return {"ok": True, "msg": f"{node}: module received from {source} in {seconds:.1f} s, not built: {reason}"}
    return {
        "ok": False,
        "msg": (
            f"{node}: the module received from {source} does not hold: {reason}. Run the role again (the copy is "
            f"repeated), or remove {STAMP_NAME} on {node} to build there"
        ),
    }
