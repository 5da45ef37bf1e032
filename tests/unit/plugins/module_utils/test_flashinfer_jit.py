"""FlashInfer JIT prebuild logic (seed 004 pitfall 2, pitfall 7, "The CUTLASS saga"; issue 9)."""

import json
from pathlib import Path

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import _flashinfer_jit as fj

FIXTURES = Path(__file__).parents[2] / "fixtures" / "flashinfer_jit"
GIB = 1024


def lines(name):
    return (FIXTURES / name).read_text().splitlines()


# --- MAX_JOBS -------------------------------------------------------------------------------------------------------


def test_max_jobs_gb10_with_no_model_resident():
    """~110 GiB free on a 20-core GB10: memory, not cores, limits the jobs (seed 004 used 10)."""
    result = fj.max_jobs(cores=20, mem_available_mib=110 * GIB, reserve_mib=8192, per_job_peak_mib=9606)
    assert result["jobs"] == 10
    assert result["limited_by"] == "memory"
    assert result["problem"] is None
    assert "floor(104448 / 9606) = 10" in result["arithmetic"]
    assert result["arithmetic"].startswith("MAX_JOBS = min(cores 20, floor((MemAvailable 112640 MiB")


def test_max_jobs_printed_for_the_h200_run():
    """The arithmetic the device run printed (docs/flashinfer-jit.md), with the per-job figure it ran with."""
    result = fj.max_jobs(cores=32, mem_available_mib=261502, reserve_mib=8192, per_job_peak_mib=9250)
    assert result["jobs"] == 27
    assert "floor(253310 / 9250) = 27) = 27 (limited by memory)" in result["arithmetic"]


def test_max_jobs_limited_by_cores():
    result = fj.max_jobs(cores=4, mem_available_mib=250 * GIB, reserve_mib=8192, per_job_peak_mib=9606)
    assert (result["jobs"], result["limited_by"]) == (4, "cores")


def test_pitfall_jit_memory_bomb_with_model_resident_refused():
    """Seed 004 pitfall 7: ~10 GiB headroom with the weights loaded is not room for one cicc: refused, not attempted."""
    result = fj.max_jobs(cores=20, mem_available_mib=10 * GIB, reserve_mib=8192, per_job_peak_mib=9606)
    assert result["jobs"] == 0
    assert result["limited_by"] == "nothing fits"
    assert "no model resident" in result["problem"]


def test_default_per_job_peak_is_the_worst_sm121_measurement():
    """Issue 17: fused_moe_120's worst cicc on the H200 host, 10605 MiB, over sm90's 9606 and seed 004's 5284."""
    assert fj.DEFAULT_PER_JOB_PEAK_MIB == 10605
    assert "10605 MiB" in fj.DEFAULT_PER_JOB_PEAK_SOURCE and "x86-64 H200" in fj.DEFAULT_PER_JOB_PEAK_SOURCE


def test_per_job_figure_for_x86_64_is_its_measured_peak():
    mib, why = fj.default_per_job_peak("x86_64")
    assert mib == 10605
    assert why.startswith("x86_64: worst cicc 10605 MiB of flashinfer 0.6.18 fused_moe_120 (sm_121a")


def test_pitfall_jit_memory_bomb_aarch64_lower_bound_is_not_taken_as_a_peak():
    """Seed 004's 5284 MiB was read when earlyoom killed the cicc: sizing GB10 by it would double MAX_JOBS."""
    mib, why = fj.default_per_job_peak("aarch64")
    assert mib == 10605
    assert "5284 MiB" in why and "lower bound" in why
    gb10 = fj.max_jobs(cores=20, mem_available_mib=110 * GIB, reserve_mib=8192, per_job_peak_mib=mib)
    assert gb10["jobs"] == 9
    assert "floor(104448 / 10605) = 9" in gb10["arithmetic"]
    assert fj.max_jobs(cores=20, mem_available_mib=110 * GIB, reserve_mib=8192, per_job_peak_mib=5284)["jobs"] == 19


def test_per_job_figure_for_an_unmeasured_arch_is_the_worst_peak():
    mib, why = fj.default_per_job_peak("riscv64")
    assert mib == 10605 and why.startswith("riscv64: nothing measured")


def test_max_jobs_of_the_h200_sm121_run():
    """Issue 17 as reported: floor(122377 / 6144) = 19, capped by 16 cores (122377 MiB is the usable figure given)."""
    result = fj.max_jobs(cores=16, mem_available_mib=122377, reserve_mib=0, per_job_peak_mib=6144)
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
    with pytest.raises(fj.FlashinferJitError):
        fj.max_jobs(**kwargs)


# --- build environment ------------------------------------------------------------------------------------------------


def test_pitfall_jit_verbose_without_debug_is_a_debug_build():
    """flashinfer 0.6.18 gen_jit_spec: FLASHINFER_JIT_DEBUG unset falls back to FLASHINFER_JIT_VERBOSE."""
    env = {"FLASHINFER_JIT_VERBOSE": "1", "MAX_JOBS": "10"}
    assert fj.is_debug_build(env)
    problems = fj.env_problems(env)
    assert len(problems) == 1
    assert "FLASHINFER_JIT_DEBUG=0" in problems[0]
    assert "-O0" in problems[0]


def test_jit_verbose_with_debug_zero_is_release():
    env = {"FLASHINFER_JIT_VERBOSE": "1", "FLASHINFER_JIT_DEBUG": "0", "MAX_JOBS": "10"}
    assert not fj.is_debug_build(env)
    assert fj.env_problems(env) == []


def test_jit_debug_set_but_empty_wins_over_verbose():
    """The real rule tests `is not None`: an empty FLASHINFER_JIT_DEBUG still overrides VERBOSE=1 (release)."""
    assert not fj.is_debug_build({"FLASHINFER_JIT_VERBOSE": "1", "FLASHINFER_JIT_DEBUG": ""})


def test_jit_debug_one_refused():
    problems = fj.env_problems({"FLASHINFER_JIT_DEBUG": "1"})
    assert len(problems) == 1
    assert "FLASHINFER_JIT_DEBUG=1" in problems[0]


@pytest.mark.parametrize("value", ["auto", "10 ", "-2", "0"])
def test_pitfall_max_jobs_flashinfer_ignores_is_refused(value):
    """cpp_ext._get_num_workers uses MAX_JOBS only when isdigit(); anything else means ninja's default, all cores."""
    problems = fj.env_problems({"MAX_JOBS": value})
    assert len(problems) == 1
    assert "MAX_JOBS" in problems[0]


def test_empty_environment_is_a_release_build():
    assert fj.env_problems({}) == []
    assert not fj.is_debug_build(None)


# --- which module, where ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capability", "arch", "module"),
    [
        ("12.1", "121a", "fused_moe_120"),
        ("sm121", "121a", "fused_moe_120"),
        ("12.0", "120f", "fused_moe_120"),
        ("9.0", "90a", "fused_moe_90"),
        ("10.0", "100a", "fused_moe_100"),
        ("10.3", "103a", "fused_moe_103"),
        ("8.9", "89", "fused_moe_89"),
    ],
)
def test_arch_folder_and_module_follow_flashinfer(capability, arch, module):
    assert fj.arch_dir(capability) == arch
    assert fj.moe_module_name(capability) == module


def test_no_cutlass_moe_module_for_older_gpus():
    with pytest.raises(fj.FlashinferJitError, match="sm75"):
        fj.moe_module_name("7.5")
    with pytest.raises(fj.FlashinferJitError):
        fj.arch_dir("hopper")


def test_cache_layout_is_the_one_measured_on_h200():
    """The path flashinfer 0.6.18 wrote on the H200 run, FLASHINFER_WORKSPACE_BASE=/var/tmp/gb10/ws."""
    paths = fj.cache_paths("/var/tmp/gb10/ws/", "0.6.18", "9.0")
    assert paths["library"] == "/var/tmp/gb10/ws/.cache/flashinfer/0.6.18/90a/cached_ops/fused_moe_90/fused_moe_90.so"
    assert paths["stamp"].endswith("/fused_moe_90/gb10-prebuild.json")


def test_cache_layout_gb10_host_and_container_differ_only_in_base():
    host = fj.cache_paths("/var/lib/gb10/flashinfer-cache", "0.6.18", "12.1")
    container = fj.cache_paths("/root/.cache/flashinfer-workspace", "0.6.18", "12.1")
    suffix = "/.cache/flashinfer/0.6.18/121a/cached_ops/fused_moe_120/fused_moe_120.so"
    assert host["library"] == "/var/lib/gb10/flashinfer-cache" + suffix
    assert container["library"] == "/root/.cache/flashinfer-workspace" + suffix


# --- cache presence (idempotence) -------------------------------------------------------------------------------------

DIGEST = "registry:5000/vllm@sha256:" + "a" * 64
WANTED = {"image_digest": DIGEST, "flashinfer_version": "0.6.18", "compute_capability": "12.1"}


def good_stamp():
    return fj.stamp(DIGEST, "0.6.18", "12.1", "f" * 64, 10, 1500.0)


def test_cache_present_when_stamp_matches():
    present, reason = fj.cache_state(WANTED, good_stamp(), "f" * 64)
    assert present
    assert "fused_moe_120 for 121a" in reason


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        ({"image_digest": "registry:5000/vllm@sha256:" + "b" * 64}, "stamp image_digest"),
        ({"flashinfer_version": "0.6.17"}, "stamp flashinfer_version"),
        ({"arch": "90a"}, "stamp arch"),
    ],
)
def test_cache_stale_when_stamp_differs(change, expect):
    stamp = good_stamp() | change
    present, reason = fj.cache_state(WANTED, stamp, "f" * 64)
    assert not present
    assert reason.startswith(expect)


def test_cache_missing_library_or_stamp_or_changed_library():
    assert fj.cache_state(WANTED, good_stamp(), None) == (False, "the module library is not in the cache")
    assert not fj.cache_state(WANTED, None, "f" * 64)[0]
    present, reason = fj.cache_state(WANTED, good_stamp(), "e" * 64)
    assert not present
    assert "changed" in reason


# --- build logs: an OOM kill presents as something else (seed 004 pitfall 2) ------------------------------------------


def test_pitfall_compilation_terminated_is_oom_kill():
    """A bare "Compilation terminated." with no diagnostic is a signal; earlyoom's line names cicc."""
    result = fj.classify_build_log(lines("bare_compilation_terminated.log"), lines("earlyoom_cicc_kill.txt"))
    assert result["kind"] == "oom_kill"
    assert result["steps"][0]["kind"] == "oom_kill"
    assert result["compiler_kills"] == [{"signal": "SIGTERM", "pid": 1848676, "name": "cicc", "source": "earlyoom"}]
    assert result["message"].startswith("OUT OF MEMORY, not a compile error")
    assert "earlyoom sent SIGTERM to cicc (pid 1848676)" in result["message"]


def test_pitfall_ninja_code_137_killed_is_oom_kill():
    result = fj.classify_build_log(lines("ninja_code137_killed.log"))
    assert result["kind"] == "oom_kill"
    assert result["steps"] == [
        {
            "target": "/root/.cache/flashinfer-workspace/.cache/flashinfer/0.6.18/121a/cached_ops/fused_moe_120/"
            "moe_gemm_moe_gemm_kernels_fp8_fp4.cuda.o",
            "kind": "oom_kill",
            "why": "exit code 137 (SIGKILL)",
        }
    ]
    assert "no earlyoom or kernel OOM line names the process" in result["message"]


def test_pitfall_gcc_killed_signal_then_compilation_terminated_is_oom_kill():
    result = fj.classify_build_log(lines("gcc_killed_signal.log"))
    assert result["kind"] == "oom_kill"
    assert "cc1plus" in result["steps"][0]["why"]


def test_pitfall_nvcc_died_due_to_signal_is_oom_kill():
    log = ["FAILED: [code=255] a.cuda.o", "nvcc error   : 'cicc' died due to signal 9 (Kill signal)"]
    kernel = ["Nov 30 07:10:00 node kernel: Out of memory: Killed process 4242 (cicc) total-vm:9834112kB"]
    result = fj.classify_build_log(log, kernel)
    assert result["kind"] == "oom_kill"
    assert result["compiler_kills"] == [{"signal": "SIGKILL", "pid": 4242, "name": "cicc", "source": "kernel"}]


def test_missing_header_then_compilation_terminated_is_compile_error():
    """gcc prints "compilation terminated." after a fatal error too: with a diagnostic, it is a real compile error."""
    log = [
        "FAILED: [code=1] flashinfer_cutlass_fused_moe_binding.cuda.o",
        *lines("nvrtc_missing_gb10.txt")[:1],
        "compilation terminated.",
    ]
    result = fj.classify_build_log(log)
    assert result["kind"] == "compile_error"
    assert "nvrtc.h: No such file or directory" in result["message"]


def test_missing_nvrtc_library_at_link_is_compile_error():
    log = ["FAILED: [code=1] fused_moe_120.so", *lines("nvrtc_missing_gb10.txt")[1:]]
    result = fj.classify_build_log(log)
    assert result["kind"] == "compile_error"
    assert "-lnvrtc" in result["message"]


def test_errors_detected_is_compile_error():
    result = fj.classify_build_log(lines("ninja_progress_errors.log"))
    assert result["kind"] == "compile_error"


def test_real_h200_ccbin_failure_is_not_called_oom():
    result = fj.classify_build_log(lines("h200_ccbin_failure.log"))
    assert result["kind"] == "compile_error"
    assert len(result["steps"]) == 2
    assert "nvcc fatal" in result["steps"][0]["why"]


def test_real_h200_progress_is_ok():
    result = fj.classify_build_log(lines("h200_progress_ok.log"))
    assert (result["kind"], result["message"]) == ("ok", "build finished")


def test_unrelated_earlyoom_kill_does_not_make_a_clean_log_an_oom():
    journal = ['earlyoom[1]: sending SIGTERM to process 906175 uid 1000 "java": oom_score 1170, VmRSS 43912 MiB']
    result = fj.classify_build_log(lines("h200_progress_ok.log"), journal)
    assert result["kind"] == "ok"
    assert result["compiler_kills"] == []
    assert result["kills"][0]["name"] == "java"


# ---------------------------------------------------------------------------------------------------------------------
# Issue 17: the build's own identity, rebuilds after a start, progress

_PREBUILT = "cxx = /opt/gcc/bin/g++\ncuda_cflags = -ccbin /opt/gcc/bin/gcc $\n    -O3\nbuild a.o: cuda_compile a.cu\n"
_SERVING = "cxx = /usr/bin/g++\ncuda_cflags = -ccbin /usr/bin/gcc $\n    -O3\nbuild a.o: cuda_compile a.cu\n"
_LOG = "# ninja log v5\n0\t1500\t1\t/c/a.cuda.o\tx\n0\t61000\t1\t/c/b.cuda.o\ty\n61000\t62000\t1\t/c/m.so\tz\n"


def test_pitfall_another_cc_in_the_serving_environment_is_refused_with_the_differing_lines():
    stamp = {"module": "fused_moe_120", "ninja_sha256": fj.sha256_text(_PREBUILT)}
    verdict = fj.ninja_identity("gb10-2", stamp, _PREBUILT, _SERVING)
    assert not verdict["same"]
    assert verdict["message"].startswith("gb10-2: the serving unit would rebuild fused_moe_120")
    assert "2 line(s) differ" in verdict["message"]
    assert "No serving unit was started." in verdict["message"]
    assert "-cxx = /opt/gcc/bin/g++" in verdict["diff"]
    assert "+cuda_cflags = -ccbin /usr/bin/gcc $" in verdict["diff"]


def test_same_build_ninja_is_the_cache():
    stamp = {"ninja_sha256": fj.sha256_text(_PREBUILT)}
    assert fj.ninja_identity("gb10-1", stamp, _PREBUILT, _PREBUILT)["same"]


def test_a_stamp_without_the_build_ninja_identity_is_not_trusted():
    verdict = fj.ninja_identity("gb10-1", {"module": "m"}, _PREBUILT, _PREBUILT)
    assert not verdict["same"]
    assert "records no build.ninja sha256" in verdict["message"]


def test_ninja_diff_is_trimmed():
    many_a = "\n".join(f"a{i}" for i in range(100))
    many_b = "\n".join(f"b{i}" for i in range(100))
    diff = fj.ninja_diff(many_a, many_b, limit=10)
    assert len(diff) == 11
    assert diff[-1].startswith("... ")


def test_ninja_log_summary_names_the_slowest_unit():
    summary = fj.ninja_log_summary(_LOG)
    assert summary == {
        "ninja_log_lines": 4,
        "ninja_log_sha256": fj.sha256_text(_LOG),
        "worst_unit_seconds": 61.0,
        "worst_unit": "b.cuda.o",
        "steps": 3,
    }


def test_nothing_rebuilt_when_log_and_library_are_the_prebuilds():
    stamp = {"module": "m", "library_sha256": "a" * 64, **fj.ninja_log_summary(_LOG)}
    assert fj.rebuild_findings(stamp, _LOG, "a" * 64) == []


def test_pitfall_a_rebuild_after_the_start_names_the_units_and_the_library():
    stamp = {"module": "fused_moe_120", "library_sha256": "a" * 64, **fj.ninja_log_summary(_LOG)}
    after = _LOG + "70000\t71000\t2\t/c/a.cuda.o\tq\n71000\t72000\t2\t/c/m.so\tr\n"
    findings = fj.rebuild_findings(stamp, after, "b" * 64)
    assert findings[0] == ".ninja_log has 6 lines, 4 at the prebuild: 2 unit(s) rebuilt (a.cuda.o, m.so)"
    assert findings[1] == "fused_moe_120.so sha256 bbbbbbbbbbbb, the prebuild's aaaaaaaaaaaa"


def test_progress_with_the_last_build_as_estimate():
    lines = ["[1/97] nvcc a", "[2/97] nvcc b", "[37/97] nvcc c"]
    progress = fj.build_progress(lines, 312, 20, 1800, {"seconds": 800, "node": "gb10-1"})
    assert progress["message"] == "[37/97] 5m12s elapsed, about 8m08s left (last build 13m20s on gb10-1)"
    assert (progress["k"], progress["n"], progress["stalled"]) == (37, 97, False)


def test_progress_without_an_earlier_build_extrapolates():
    progress = fj.build_progress(["[10/40] cc"], 100, 5, 600)
    assert (
        progress["message"]
        == "[10/40] 1m40s elapsed, about 5m00s left (at this build's pace; no earlier build to go by)"
    )


def test_pitfall_a_build_that_makes_no_progress_is_named_stalled():
    progress = fj.build_progress(["[10/40] cc"], 4000, 1900, 1800)
    assert progress["stalled"]
    assert "STALLED: no step finished for 31m40s, more than the worst case of one unit (30m00s)" in progress["message"]


def test_stall_limit_from_the_last_builds_slowest_unit():
    assert fj.stall_seconds(0, 1000) == 3000
    assert fj.stall_seconds(0, 10) == fj.STALL_FLOOR_S
    assert fj.stall_seconds(900, 400) == 900


# ---------------------------------------------------------------------------------------------------------------------
# Built once per cluster (issue 17)

_KEY_A = fj.share_key("r@sha256:" + "a" * 64, "0.6.18", "12.1", "/root/.cache/flashinfer-workspace", {"CC": "gcc"})
_KEY_B = fj.share_key("r@sha256:" + "b" * 64, "0.6.18", "12.1", "/root/.cache/flashinfer-workspace", {"CC": "gcc"})


def test_share_key_holds_what_reaches_build_ninja_and_nothing_else():
    env = {"CC": "gcc", "FLASHINFER_EXTRA_CUDAFLAGS": "-x", "VLLM_HOST_IP": "10.0.0.1", "MAX_JOBS": "4"}
    key = json.loads(fj.share_key("r@sha256:" + "a" * 64, "0.6.18", "12.1", "/w/", env))
    assert key["env"] == {"CC": "gcc", "FLASHINFER_EXTRA_CUDAFLAGS": "-x"}
    assert (key["arch"], key["workspace_base"]) == ("121a", "/w")
    other_node = dict(env, VLLM_HOST_IP="10.0.0.2", MAX_JOBS="9")
    assert fj.share_key("r@sha256:" + "a" * 64, "0.6.18", "12.1", "/w", other_node) == json.dumps(
        key, sort_keys=True, separators=(",", ":")
    )
    assert fj.share_key("r@sha256:" + "a" * 64, "0.6.18", "12.1", "/w", dict(env, CC="clang")) != json.dumps(
        key, sort_keys=True, separators=(",", ":")
    )


def test_share_roles_first_due_node_builds_the_others_receive_from_it():
    nodes = [{"name": f"spark-{i}", "key": _KEY_A, "has": False, "due": True} for i in (1, 2, 3)]
    roles = fj.share_roles(nodes)
    assert roles["spark-1"]["action"] == "build"
    assert [roles[n]["source"] for n in ("spark-2", "spark-3")] == ["spark-1", "spark-1"]


def test_share_roles_a_node_with_a_valid_stamp_gives_it_and_nobody_builds():
    nodes = [
        {"name": "spark-1", "key": _KEY_A, "has": False, "due": True},
        {"name": "spark-2", "key": _KEY_A, "has": True, "due": False},
    ]
    assert fj.share_roles(nodes)["spark-1"] == {"action": "receive", "source": "spark-2", "key": _KEY_A}


def test_share_roles_another_digest_or_arch_builds_its_own():
    other_arch = fj.share_key("r@sha256:" + "a" * 64, "0.6.18", "9.0", "/root/.cache/flashinfer-workspace", {})
    nodes = [
        {"name": "spark-1", "key": _KEY_A, "has": False, "due": True},
        {"name": "spark-2", "key": _KEY_B, "has": False, "due": True},
        {"name": "h200-1", "key": other_arch, "has": False, "due": True},
    ]
    assert {name: role["action"] for name, role in fj.share_roles(nodes).items()} == {
        "spark-1": "build",
        "spark-2": "build",
        "h200-1": "build",
    }


def test_share_roles_rolling_upgrade_builds_once_on_the_first_drained_node():
    """serial: 1. Batch 1: spark-1 alone is due for the new image (the others hold the old one) and builds. Batch 2:
    spark-1's record now holds the new key; spark-2 receives from it (spark-1 serves meanwhile)."""
    batch1 = [
        {"name": "spark-1", "key": _KEY_B, "has": False, "due": True},
    ]
    assert fj.share_roles(batch1)["spark-1"]["action"] == "build"
    batch2 = [
        {"name": "spark-1", "key": _KEY_B, "has": True, "due": False},
        {"name": "spark-2", "key": _KEY_B, "has": False, "due": True},
    ]
    assert fj.share_roles(batch2)["spark-2"] == {"action": "receive", "source": "spark-1", "key": _KEY_B}


_NINJA = """ninja_required_version = 1.3
rule cuda_compile
  command = $nvcc -MMD -MF $out.d -c $in -o $out
  depfile = $out.d
  deps = gcc

build /w/c/121a/cached_ops/fused_moe_120/a.cuda.o: cuda_compile $
    /w/c/121a/generated/cutlass_instantiations/120/a.c
build /w/c/121a/cached_ops/fused_moe_120/b.cuda.o: cuda_compile /usr/lib/python3/flashinfer/csrc/b.cu
build /w/c/121a/cached_ops/fused_moe_120/fused_moe_120.so: link /w/c/121a/cached_ops/fused_moe_120/a.cuda.o
"""


def test_ninja_input_dirs_are_the_generated_sources_in_the_cache():
    assert fj.ninja_input_dirs(_NINJA, "/w/c/121a") == [
        "cached_ops/fused_moe_120",
        "generated/cutlass_instantiations/120",
    ]


def _files(**over):
    build = "cached_ops/fused_moe_120"
    files = {
        f"{build}/fused_moe_120.so": {"size": 3, "sha256": "s" * 64, "mtime_ns": 2},
        f"{build}/build.ninja": {"size": 3, "sha256": "n" * 64, "mtime_ns": 1},
        f"{build}/.ninja_log": {"size": 3, "sha256": "l" * 64, "mtime_ns": 2},
        f"{build}/.ninja_deps": {"size": 3, "sha256": "d" * 64, "mtime_ns": 2},
        f"{build}/{fj.STAMP_NAME}": {"size": 3, "sha256": "t" * 64, "mtime_ns": 3},
        f"{build}/{fj.STAMP_NAME}.tmp": {"size": 3, "sha256": "t" * 64, "mtime_ns": 3},
    }
    files.update(over)
    return {k: v for k, v in files.items() if v is not None}


_STAMP = {"library_sha256": "s" * 64, "ninja_sha256": "n" * 64}


def test_share_manifest_sends_the_module_and_leaves_partial_files_out():
    manifest, problems = fj.share_manifest("spark-1", _files(), _STAMP, "fused_moe_120", _NINJA)
    assert problems == []
    assert f"cached_ops/fused_moe_120/{fj.STAMP_NAME}.tmp" not in manifest
    assert len(manifest) == 5


def test_pitfall_rebuild_at_profiling_manifest_without_ninja_deps_is_refused():
    """Without .ninja_deps ninja counts every deps=gcc unit dirty: the receiver's serving start would rebuild the
    module at KV-cache profiling, beside the weights (seed 004, the CUTLASS saga)."""
    _manifest, problems = fj.share_manifest(
        "spark-1", _files(**{"cached_ops/fused_moe_120/.ninja_deps": None}), _STAMP, "fused_moe_120", _NINJA
    )
    assert any(".ninja_deps is missing" in p and p.startswith("spark-1: ") for p in problems)


def test_pitfall_rebuild_at_profiling_manifest_refuses_a_library_that_is_not_the_stamped_one():
    wrong = {"cached_ops/fused_moe_120/fused_moe_120.so": {"size": 3, "sha256": "x" * 64, "mtime_ns": 2}}
    _manifest, problems = fj.share_manifest("spark-1", _files(**wrong), _STAMP, "fused_moe_120", _NINJA)
    assert any("fused_moe_120.so sha256 xxxxxxxxxxxx differs from the stamp's ssssssssssss" in p for p in problems)
    assert problems[-1].startswith("spark-1 cannot give its fused_moe_120 to another node")


def test_read_text_is_none_for_a_file_that_is_not_there(tmp_path):
    (tmp_path / "build.ninja").write_text("rule cxx\n")
    assert fj.read_text(str(tmp_path / "build.ninja")) == "rule cxx\n"
    assert fj.read_text(str(tmp_path / "missing")) is None


def test_read_text_replaces_bytes_that_are_not_text_only_when_asked(tmp_path):
    """.ninja_log is read with errors="replace" (a torn write may leave any byte); a stamp is read strictly."""
    (tmp_path / ".ninja_log").write_bytes(b"# ninja log v5\n\xff\n")
    assert fj.read_text(str(tmp_path / ".ninja_log"), errors="replace") == "# ninja log v5\n\ufffd\n"
    with pytest.raises(UnicodeDecodeError):
        fj.read_text(str(tmp_path / ".ninja_log"))


# Issue 38 item 4: a module prebuilt in the image (flashinfer 0.7 JIT-cache providers).
PREBUILT = {
    "kind": "prebuilt",
    "image_digest": "sha256:" + "7" * 64,
    "flashinfer_version": "0.7.2.post1",
    "arch": "121a",
    "module": "fused_moe_120",
    "aot": [{"provider": "cu130-sm121a", "path": "/opt/jit_cache/fused_moe_120/fused_moe_120.so", "sha256": "ab"}],
}
WANTED_07 = {"image_digest": "sha256:" + "7" * 64, "flashinfer_version": "0.7.2.post1", "compute_capability": "12.1"}


def test_a_prebuilt_stamp_is_present_without_a_library_in_the_cache():
    present, reason = fj.cache_state(WANTED_07, PREBUILT, None)
    assert present and "prebuilt in the image (/opt/jit_cache/fused_moe_120/fused_moe_120.so)" in reason
    assert not fj.cache_state(WANTED_07 | {"image_digest": "sha256:" + "8" * 64}, PREBUILT, None)[0]
    assert not fj.cache_state(WANTED_07, PREBUILT | {"aot": []}, None)[0]


def test_pitfall_rebuild_at_profiling_the_serving_unit_must_reach_the_prebuilt_module():
    same = fj.ninja_identity("spark-1", PREBUILT, None, "any text", PREBUILT["aot"])
    assert same["same"] and "loads the prebuilt /opt/jit_cache" in same["message"]
    missing = fj.ninja_identity("spark-1", PREBUILT, None, "any text", [])
    assert not missing["same"]
    assert missing["message"].startswith("spark-1: the prebuild found fused_moe_120 prebuilt in the image")
    assert "No serving unit was started." in missing["message"]


def test_a_prebuilt_module_the_prebuild_did_not_see_is_refused():
    built = {"module": "fused_moe_120", "ninja_sha256": fj.sha256_text("ninja")}
    verdict = fj.ninja_identity("spark-1", built, "ninja", "ninja", PREBUILT["aot"])
    assert not verdict["same"]
    assert "that the prebuild's environment did not see" in verdict["message"]
    assert fj.ninja_identity("spark-1", built, "ninja", "ninja", [])["same"]
