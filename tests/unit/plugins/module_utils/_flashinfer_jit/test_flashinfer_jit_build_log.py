# Copyright: gb10.serving maintainers
# Apache-2.0
"""Build logs: an OOM kill presents as something else (seed 004 pitfall 2; _flashinfer_jit/build_log.py)."""

from __future__ import annotations

from _flashinfer_jit_fixtures import lines

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.build_log import classify_build_log


def test_pitfall_compilation_terminated_is_oom_kill():
    """A bare "Compilation terminated." with no diagnostic is a signal; earlyoom's line names cicc."""
    result = classify_build_log(lines("bare_compilation_terminated.log"), lines("earlyoom_cicc_kill.txt"))
    assert result["kind"] == "oom_kill"
    assert result["steps"][0]["kind"] == "oom_kill"
    assert result["compiler_kills"] == [{"signal": "SIGTERM", "pid": 1848676, "name": "cicc", "source": "earlyoom"}]
    assert result["message"].startswith("OUT OF MEMORY, not a compile error")
    assert "earlyoom sent SIGTERM to cicc (pid 1848676)" in result["message"]


def test_pitfall_ninja_code_137_killed_is_oom_kill():
    result = classify_build_log(lines("ninja_code137_killed.log"))
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
    result = classify_build_log(lines("gcc_killed_signal.log"))
    assert result["kind"] == "oom_kill"
    assert "cc1plus" in result["steps"][0]["why"]


def test_pitfall_nvcc_died_due_to_signal_is_oom_kill():
    log = ["FAILED: [code=255] a.cuda.o", "nvcc error   : 'cicc' died due to signal 9 (Kill signal)"]
    kernel = ["Nov 30 07:10:00 node kernel: Out of memory: Killed process 4242 (cicc) total-vm:9834112kB"]
    result = classify_build_log(log, kernel)
    assert result["kind"] == "oom_kill"
    assert result["compiler_kills"] == [{"signal": "SIGKILL", "pid": 4242, "name": "cicc", "source": "kernel"}]


def test_missing_header_then_compilation_terminated_is_compile_error():
    """gcc prints "compilation terminated." after a fatal error too: with a diagnostic, it is a real compile error."""
    log = [
        "FAILED: [code=1] flashinfer_cutlass_fused_moe_binding.cuda.o",
        *lines("nvrtc_missing_gb10.txt")[:1],
        "compilation terminated.",
    ]
    result = classify_build_log(log)
    assert result["kind"] == "compile_error"
    assert "nvrtc.h: No such file or directory" in result["message"]


def test_missing_nvrtc_library_at_link_is_compile_error():
    log = ["FAILED: [code=1] fused_moe_120.so", *lines("nvrtc_missing_gb10.txt")[1:]]
    result = classify_build_log(log)
    assert result["kind"] == "compile_error"
    assert "-lnvrtc" in result["message"]


def test_errors_detected_is_compile_error():
    result = classify_build_log(lines("ninja_progress_errors.log"))
    assert result["kind"] == "compile_error"


def test_real_h200_ccbin_failure_is_not_called_oom():
    result = classify_build_log(lines("h200_ccbin_failure.log"))
    assert result["kind"] == "compile_error"
    assert len(result["steps"]) == 2
    assert "nvcc fatal" in result["steps"][0]["why"]


def test_real_h200_progress_is_ok():
    result = classify_build_log(lines("h200_progress_ok.log"))
    assert (result["kind"], result["message"]) == ("ok", "build finished")


def test_unrelated_earlyoom_kill_does_not_make_a_clean_log_an_oom():
    journal = ['earlyoom[1]: sending SIGTERM to process 906175 uid 1000 "java": oom_score 1170, VmRSS 43912 MiB']
    result = classify_build_log(lines("h200_progress_ok.log"), journal)
    assert result["kind"] == "ok"
    assert result["compiler_kills"] == []
    assert result["kills"][0]["name"] == "java"
