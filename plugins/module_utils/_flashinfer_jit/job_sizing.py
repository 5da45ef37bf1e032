# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Compile-job sizing: MAX_JOBS from the cores, MemAvailable, a reserve and the per-job peak RSS measured on each CPU
architecture (seed 004 pitfall 7, the CUTLASS saga; docs/flashinfer-jit.md)."""

from __future__ import annotations

import math

from .errors import FlashinferJitError

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
