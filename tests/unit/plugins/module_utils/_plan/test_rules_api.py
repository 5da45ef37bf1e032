"""The API closed by default (issue 18): the plan refuses a public frontend without a key unless the inventory opens
it, and prints who may use the API."""

from __future__ import annotations

from _plan_fixtures import only, plan_mod, replicas, rules, run

OPEN = {"key_set": False, "anonymous": False, "bind": "*", "port": 8080, "tls": False}


def test_api_closed():
    violation = only(run(replicas(), api=OPEN), "api_closed")
    assert violation["value"] == "*:8080" and "Set gb10_api_key" in violation["message"]
    assert "proxy_anonymous: true" in violation["message"]
    assert rules(run(replicas(), api={**OPEN, "key_set": True})) == []
    assert rules(run(replicas(), api={**OPEN, "bind": "127.0.0.1"})) == []
    assert rules(run(replicas(), api=None)) == []  # no proxy group: nothing to say


def test_the_plan_prints_who_may_use_the_api():
    closed = plan_mod.format_plan(run(replicas(), api={**OPEN, "key_set": True, "tls": True}))
    assert "api: proxy *:8080 https, key required (Authorization: Bearer gb10_api_key)" in closed
    anonymous = run(replicas(), api={**OPEN, "anonymous": True})
    assert anonymous["violations"] == [] and anonymous["api"]["anonymous"] is True
    assert "ANONYMOUS (proxy_anonymous: true)" in plan_mod.format_plan(anonymous)
