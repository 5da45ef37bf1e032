# Copyright: gb10.serving maintainers
# Apache-2.0
"""One test per rule of rules_memory.py, named after the rule (test_registry.py checks that each has one)."""

from __future__ import annotations

import pytest
from _plan_fixtures import mp, only, replicas, run, tp


def test_gpu_memory_utilization():
    result = run(replicas(nodes={"spark-a": {"gpu_memory_utilization": 0.99}, "spark-b": {}}))
    violations = [v for v in result["violations"] if v["rule"] == "gpu_memory_utilization"]
    assert [(v["node"], v["value"]) for v in violations] == [("spark-a", 0.99), ("spark-b", None)]
    assert "between 0 and 0.98" in violations[0]["message"]
    assert result["nodes"]["spark-a"]["memory"] == {}  # no share, no memory table


def test_max_num_seqs():
    violation = only(run(replicas(**{"nodes__spark-b__max_num_seqs": "many"})), "max_num_seqs")
    assert violation["node"] == "spark-b" and violation["value"] == "many"


def test_memory_headroom():
    profile = replicas(nodes={"spark-a": {"gpu_memory_utilization": 0.78}, "spark-b": {"gpu_memory_utilization": 0.85}})
    violation = only(run(profile), "memory_headroom")
    assert violation["node"] == "spark-b" and "below the margin 5.00 GiB" in violation["message"]


def test_memory_kv_budget():
    violation = only(run(replicas(model__checkpoint_gib=84, context_length=8192)), "memory_kv_budget")
    assert violation["node"] == "spark-b" and "has no room for the KV cache" in violation["message"]


def test_memory_kv_context():
    violation = only(run(replicas(context_length=1000000, model__max_position_embeddings=1048576)), "memory_kv_context")
    assert violation["node"] == "spark-b" and "fewer than one request at context_length 1000000" in violation["message"]


def test_engine_shm_size():
    # not a Docker size: refused, and nothing rendered from it
    result = run(replicas(memory__shm_size="lots"))
    violation = only(result, "engine_shm_size")
    assert violation["value"] == "lots" and "whole number with b, k, m or g" in violation["message"]
    assert result["nodes"]["spark-a"]["shm_size"] is None
    # a line break would add a line to the unit: refused too
    assert only(run(replicas(memory__shm_size="1g\nExecStartPre=/bin/true")), "engine_shm_size")
    # below what vLLM's shared-memory queue took (160 MiB measured on vLLM 0.32): refused with the fix
    violation = only(run(replicas(memory__shm_size="64m")), "engine_shm_size")
    assert "64m (64 MiB) is below the 160 MiB" in violation["message"] and "spark-a, spark-b" in violation["message"]
    assert "Fix: memory.shm_size 1g or more" in violation["message"]


def test_pitfall_engine_shm_carved_from_unified_memory_counts_in_the_table():
    """Issue 39 item 2: Docker's /dev/shm is carved from the same memory: the plan's size is what the unit renders,
    and it counts in the node's table (headroom and the MemAvailable a start needs)."""
    small = run(replicas(memory__shm_size="256m"))["nodes"]["spark-b"]
    large = run(replicas(memory__shm_size="8g"))["nodes"]["spark-b"]
    assert (small["shm_size"], large["shm_size"]) == ("256m", "8g")
    assert small["memory"]["shm_gib"] == 0.25 and large["memory"]["shm_gib"] == 8.0
    assert small["memory"]["headroom_gib"] - large["memory"]["headroom_gib"] == pytest.approx(7.75, abs=0.01)
    assert large["memory"]["start_need_gib"] - small["memory"]["start_need_gib"] == pytest.approx(7.75, abs=0.01)
    # the plan's default, where the profile states none
    assert run(replicas())["nodes"]["spark-b"]["shm_size"] == "1g"
    # 16g leaves both below the margin: the plan refuses before any start does, the size in the arithmetic
    found = [v for v in run(replicas(memory__shm_size="16g"))["violations"] if v["rule"] == "memory_headroom"]
    assert [v["node"] for v in found] == ["spark-a", "spark-b"]
    assert "the engine's /dev/shm 16.00 GiB" in found[1]["message"] and "0.70 or less" in found[1]["message"]
    # the Ray launcher's containers use the host's IPC namespace: no size to render, nothing of theirs counted
    for entry in run(tp())["nodes"].values():
        assert entry["shm_size"] is None and entry["memory"]["shm_gib"] == 0
    for entry in run(mp())["nodes"].values():
        assert entry["shm_size"] == "256m" and entry["memory"]["shm_gib"] == 0.25
