# Copyright: gb10.serving maintainers
# Apache-2.0
"""One test per rule of rules_memory.py, named after the rule (test_registry.py checks that each has one)."""

from __future__ import annotations

from _plan_fixtures import only, replicas, run


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
