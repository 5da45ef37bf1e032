# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 17: the build's own identity and the rebuilds after a start; issue 38 item 4: the prebuilt modules
(plugins/module_utils/_flashinfer_jit/build_identity.py)."""

from __future__ import annotations

from _flashinfer_jit_fixtures import PREBUILT

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.build_identity import (
    ninja_diff,
    ninja_identity,
    ninja_log_summary,
    rebuild_findings,
    sha256_text,
)

_PREBUILT = "cxx = /opt/gcc/bin/g++\ncuda_cflags = -ccbin /opt/gcc/bin/gcc $\n    -O3\nbuild a.o: cuda_compile a.cu\n"

_SERVING = "cxx = /usr/bin/g++\ncuda_cflags = -ccbin /usr/bin/gcc $\n    -O3\nbuild a.o: cuda_compile a.cu\n"

_LOG = "# ninja log v5\n0\t1500\t1\t/c/a.cuda.o\tx\n0\t61000\t1\t/c/b.cuda.o\ty\n61000\t62000\t1\t/c/m.so\tz\n"


def test_pitfall_another_cc_in_the_serving_environment_is_refused_with_the_differing_lines():
    stamp = {"module": "fused_moe_120", "ninja_sha256": sha256_text(_PREBUILT)}
    verdict = ninja_identity("gb10-2", stamp, _PREBUILT, _SERVING)
    assert not verdict["same"]
    assert verdict["message"].startswith("gb10-2: the serving unit would rebuild fused_moe_120")
    assert "2 line(s) differ" in verdict["message"]
    assert "No serving unit was started." in verdict["message"]
    assert "-cxx = /opt/gcc/bin/g++" in verdict["diff"]
    assert "+cuda_cflags = -ccbin /usr/bin/gcc $" in verdict["diff"]


def test_same_build_ninja_is_the_cache():
    stamp = {"ninja_sha256": sha256_text(_PREBUILT)}
    assert ninja_identity("gb10-1", stamp, _PREBUILT, _PREBUILT)["same"]


def test_a_stamp_without_the_build_ninja_identity_is_not_trusted():
    verdict = ninja_identity("gb10-1", {"module": "m"}, _PREBUILT, _PREBUILT)
    assert not verdict["same"]
    assert "records no build.ninja sha256" in verdict["message"]


def test_ninja_diff_is_trimmed():
    many_a = "\n".join(f"a{i}" for i in range(100))
    many_b = "\n".join(f"b{i}" for i in range(100))
    diff = ninja_diff(many_a, many_b, limit=10)
    assert len(diff) == 11
    assert diff[-1].startswith("... ")


def test_ninja_log_summary_names_the_slowest_unit():
    summary = ninja_log_summary(_LOG)
    assert summary == {
        "ninja_log_lines": 4,
        "ninja_log_sha256": sha256_text(_LOG),
        "worst_unit_seconds": 61.0,
        "worst_unit": "b.cuda.o",
        "steps": 3,
    }


def test_nothing_rebuilt_when_log_and_library_are_the_prebuilds():
    stamp = {"module": "m", "library_sha256": "a" * 64, **ninja_log_summary(_LOG)}
    assert rebuild_findings(stamp, _LOG, "a" * 64) == []


def test_pitfall_a_rebuild_after_the_start_names_the_units_and_the_library():
    stamp = {"module": "fused_moe_120", "library_sha256": "a" * 64, **ninja_log_summary(_LOG)}
    after = _LOG + "70000\t71000\t2\t/c/a.cuda.o\tq\n71000\t72000\t2\t/c/m.so\tr\n"
    findings = rebuild_findings(stamp, after, "b" * 64)
    assert findings[0] == ".ninja_log has 6 lines, 4 at the prebuild: 2 unit(s) rebuilt (a.cuda.o, m.so)"
    assert findings[1] == "fused_moe_120.so sha256 bbbbbbbbbbbb, the prebuild's aaaaaaaaaaaa"


def test_pitfall_rebuild_at_profiling_the_serving_unit_must_reach_the_prebuilt_module():
    same = ninja_identity("spark-1", PREBUILT, None, "any text", PREBUILT["aot"])
    assert same["same"] and "loads the prebuilt /opt/jit_cache" in same["message"]
    missing = ninja_identity("spark-1", PREBUILT, None, "any text", [])
    assert not missing["same"]
    assert missing["message"].startswith("spark-1: the prebuild found fused_moe_120 prebuilt in the image")
    assert "No serving unit was started." in missing["message"]


def test_a_prebuilt_module_the_prebuild_did_not_see_is_refused():
    built = {"module": "fused_moe_120", "ninja_sha256": sha256_text("ninja")}
    verdict = ninja_identity("spark-1", built, "ninja", "ninja", PREBUILT["aot"])
    assert not verdict["same"]
    assert "that the prebuild's environment did not see" in verdict["message"]
    assert ninja_identity("spark-1", built, "ninja", "ninja", [])["same"]
