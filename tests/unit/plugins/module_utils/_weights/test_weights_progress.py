# Copyright: gb10.serving maintainers
# Apache-2.0
"""One round of the progress loop (plugins/module_utils/_weights/progress.py)."""

from __future__ import annotations

from ansible_collections.gb10.serving.plugins.module_utils._weights.progress import progress_round


def status(**fields):
    base = {"bytes_done": 0, "bytes_total": 100 << 20, "finished": False, "error": None, "time": 1000.0}
    return {**base, **fields}


def progress(state, now=1001.0, round_no=3):
    return progress_round("spark-1", "fetch", state, now, round_no, 960, 15, 120, "gb10-weights-fetch")


def test_progress_line_has_bytes_rate_and_eta():
    state = status(bytes_done=30 << 20, bytes_at_start=10 << 20, started=990.0)
    result = progress(state)
    assert not result["ended"] and result["error"] is None
    assert result["msg"] == ("spark-1 fetch: 30.0 MiB of 100.0 MiB (30.0%), 2.0 MiB/s, ETA 35 s, round 3 of 960")


def test_progress_ends_on_the_final_status():
    assert progress(status(bytes_done=100 << 20, finished=True))["finished"]
    failed = progress(status(finished=True, error="x.safetensors: 5 attempts failed"))
    assert failed["error"] == failed["msg"] and failed["ended"]
    assert failed["msg"].startswith("spark-1: the fetch failed: x.safetensors: 5 attempts failed.")


def test_progress_fails_when_the_job_stopped_reporting():
    result = progress(status(), now=1200.0)
    assert result["error"] and result["ended"]
    assert "stopped reporting 200 s ago" in result["msg"] and "docker logs gb10-weights-fetch" in result["msg"]


def test_progress_without_a_status_file_waits_then_fails():
    assert not progress(None, round_no=2)["ended"]
    assert progress(None, round_no=9)["error"]
