# Copyright: gb10.serving maintainers
# Apache-2.0
"""MAX_JOBS and the per-job figure (plugins/module_utils/_flashinfer_jit/job_sizing.py; seed 004 pitfall 7)."""

from __future__ import annotations

import pytest

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.errors import FlashinferJitError
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.job_sizing import (
    DEFAULT_PER_JOB_PEAK_MIB,
    DEFAULT_PER_JOB_PEAK_SOURCE,
    default_per_job_peak,
    max_jobs,
)

GIB = 1024


def test_max_jobs_gb10_with_no_model_resident():
    """~110 GiB free on a 20-core GB10: memory, not cores, limits the jobs (seed 004 used 10)."""
    result = max_jobs(cores=20, mem_available_mib=110 * GIB, reserve_mib=8192, per_job_peak_mib=9606)
    assert result["jobs"] == 10
    assert result["limited_by"] == "memory"
    assert result["problem"] is None
    assert "floor(104448 / 9606) = 10" in result["arithmetic"]
    assert result["arithmetic"].startswith("MAX_JOBS = min(cores 20, floor((MemAvailable 112640 MiB")


def test_max_jobs_printed_for_the_h200_run():
    """The arithmetic the device run printed (docs/flashinfer-jit.md), with the per-job figure it ran with."""
    result = max_jobs(cores=32, mem_available_mib=261502, reserve_mib=8192, per_job_peak_mib=9250)
    assert result["jobs"] == 27
    assert "floor(253310 / 9250) = 27) = 27 (limited by memory)" in result["arithmetic"]


def test_max_jobs_limited_by_cores():
    result = max_jobs(cores=4, mem_available_mib=250 * GIB, reserve_mib=8192, per_job_peak_mib=9606)
    assert (result["jobs"], result["limited_by"]) == (4, "cores")


def test_pitfall_jit_memory_bomb_with_model_resident_refused():
    """Seed 004 pitfall 7: ~10 GiB headroom with the weights loaded is not room for one cicc: refused, not attempted."""
    result = max_jobs(cores=20, mem_available_mib=10 * GIB, reserve_mib=8192, per_job_peak_mib=9606)
    assert result["jobs"] == 0
    assert result["limited_by"] == "nothing fits"
    assert "no model resident" in result["problem"]


def test_default_per_job_peak_is_the_worst_sm121_measurement():
    """Issue 17: fused_moe_120's worst cicc on the H200 host, 10605 MiB, over sm90's 9606 and seed 004's 5284."""
    assert DEFAULT_PER_JOB_PEAK_MIB == 10605
    assert "10605 MiB" in DEFAULT_PER_JOB_PEAK_SOURCE and "x86-64 H200" in DEFAULT_PER_JOB_PEAK_SOURCE


def test_per_job_figure_for_x86_64_is_its_measured_peak():
    mib, why = default_per_job_peak("x86_64")
    assert mib == 10605
    assert why.startswith("x86_64: worst cicc 10605 MiB of flashinfer 0.6.18 fused_moe_120 (sm_121a")


def test_pitfall_jit_memory_bomb_aarch64_lower_bound_is_not_taken_as_a_peak():
    """Seed 004's 5284 MiB was read when earlyoom killed the cicc: sizing GB10 by it would double MAX_JOBS."""
    mib, why = default_per_job_peak("aarch64")
    assert mib == 10605
    assert "5284 MiB" in why and "lower bound" in why
    gb10 = max_jobs(cores=20, mem_available_mib=110 * GIB, reserve_mib=8192, per_job_peak_mib=mib)
    assert gb10["jobs"] == 9
    assert "floor(104448 / 10605) = 9" in gb10["arithmetic"]
    assert max_jobs(cores=20, mem_available_mib=110 * GIB, reserve_mib=8192, per_job_peak_mib=5284)["jobs"] == 19


def test_per_job_figure_for_an_unmeasured_arch_is_the_worst_peak():
    mib, why = default_per_job_peak("riscv64")
    assert mib == 10605 and why.startswith("riscv64: nothing measured")


def test_max_jobs_of_the_h200_sm121_run():
    """Issue 17 as reported: floor(122377 / 6144) = 19, capped by 16 cores (122377 MiB is the usable figure given)."""
    result = max_jobs(cores=16, mem_available_mib=122377, reserve_mib=0, per_job_peak_mib=6144)
    assert (result["jobs"], result["limited_by"]) == (16, "cores")
    assert "floor(122377 / 6144) = 19) = 16 (limited by cores)" in result["arithmetic"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"cores": 0, "mem_available_mib": 1000},
        {"cores": 4, "mem_available_mib": -1},
        {"cores": 4, "mem_available_mib": 1000, "per_job_peak_mib": 0},
        {"cores": 4, "mem_available_mib": 1000, "reserve_mib": -5},
        {"cores": True, "mem_available_mib": 1000},
    ],
)
def test_max_jobs_rejects_impossible_inputs(kwargs):
    with pytest.raises(FlashinferJitError):
        max_jobs(**kwargs)
