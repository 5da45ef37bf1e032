# Copyright: gb10.serving maintainers
# Apache-2.0
"""One test per rule of rules_nodes.py, named after the rule (test_registry.py checks that each has one)."""

from __future__ import annotations

from _plan_fixtures import nodes, only, replicas, rules, run


def test_node_override_unknown_host():
    profile = replicas()
    profile["nodes"]["spark-c"] = {"gpu_memory_utilization": 0.7}
    violation = only(run(profile), "node_override_unknown_host")
    assert violation["node"] == "spark-c" and "not in gb10_nodes (spark-a, spark-b)" in violation["message"]


def test_model_not_local_path():
    node_map = nodes()
    node_map["spark-a"]["snapshot_path"] = "example-org/GLM-5.3-Flash-NVFP4-QAD"
    violation = only(run(replicas(), node_map), "model_not_local_path")
    assert violation["node"] == "spark-a" and violation["value"] == "example-org/GLM-5.3-Flash-NVFP4-QAD"


def test_model_snapshot_outside_cache():
    node_map = nodes()
    node_map["spark-b"]["snapshot_path"] = "/models/glm/"
    violation = only(run(replicas(), node_map), "model_snapshot_outside_cache")
    assert violation["node"] == "spark-b" and violation["value"] == "/models/glm"
    assert "outside the HF cache /var/lib/gb10/hf-cache" in violation["message"]


def test_node_facts_missing():
    node_map = nodes()
    node_map["spark-a"]["facts"]["cores"] = None
    violation = only(run(replicas(), node_map), "node_facts_missing")
    assert violation["node"] == "spark-a" and violation["value"] == "cores"


def test_max_jobs_not_forwarded():
    result = run(replicas(env={"MAX_JOBS": "all"}))
    assert rules(result) == ["max_jobs_not_forwarded", "max_jobs_not_forwarded"]
    assert "(the profile env overrides max_jobs=2)" in result["violations"][0]["message"]


def test_max_jobs_above_cores():
    result = run(replicas(env={"MAX_JOBS": "24"}))
    assert rules(result) == ["max_jobs_above_cores", "max_jobs_above_cores"]
    assert result["violations"][0]["value"] == 24 and "at most 20" in result["violations"][0]["message"]
