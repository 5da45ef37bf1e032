# Copyright: gb10.serving maintainers
# Apache-2.0
"""One test per rule of rules_profile.py, named after the rule (test_registry.py checks that each has one)."""

from __future__ import annotations

from _plan_fixtures import nodes, only, plan_mod, replicas, tp


def test_profile_missing():
    violation = only(plan_mod.plan("", {"b": tp(), "a": replicas()}, nodes()), "profile_missing")
    assert violation["node"] == "all" and "this inventory has: a, b" in violation["message"]


def test_profile_unknown():
    result = plan_mod.plan("c", {"b": tp(), "a": replicas()}, nodes())
    violation = only(result, "profile_unknown")
    assert violation["value"] == "c" and "choose one of: a, b" in violation["message"]
    assert result["nodes"] == {} and "tensor_parallel_size" not in result
