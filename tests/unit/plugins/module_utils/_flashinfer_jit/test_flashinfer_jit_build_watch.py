# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 17: a running build's progress and stall (plugins/module_utils/_flashinfer_jit/build_watch.py)."""

from __future__ import annotations

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.build_watch import (
    STALL_FLOOR_S,
    build_progress,
    stall_seconds,
)


def test_progress_with_the_last_build_as_estimate():
    lines = ["[1/97] nvcc a", "[2/97] nvcc b", "[37/97] nvcc c"]
    progress = build_progress(lines, 312, 20, 1800, {"seconds": 800, "node": "gb10-1"})
    assert progress["message"] == "[37/97] 5m12s elapsed, about 8m08s left (last build 13m20s on gb10-1)"
    assert (progress["k"], progress["n"], progress["stalled"]) == (37, 97, False)


def test_progress_without_an_earlier_build_extrapolates():
    progress = build_progress(["[10/40] cc"], 100, 5, 600)
    assert (
        progress["message"]
        == "[10/40] 1m40s elapsed, about 5m00s left (at this build's pace; no earlier build to go by)"
    )


def test_pitfall_a_build_that_makes_no_progress_is_named_stalled():
    progress = build_progress(["[10/40] cc"], 4000, 1900, 1800)
    assert progress["stalled"]
    assert "STALLED: no step finished for 31m40s, more than the worst case of one unit (30m00s)" in progress["message"]


def test_stall_limit_from_the_last_builds_slowest_unit():
    assert stall_seconds(0, 1000) == 3000
    assert stall_seconds(0, 10) == STALL_FLOOR_S
    assert stall_seconds(900, 400) == 900
