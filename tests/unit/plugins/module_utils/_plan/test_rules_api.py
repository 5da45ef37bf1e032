"""The API closed by default (issue 18): the plan refuses a public frontend without a key unless the inventory opens
it, and prints who may use the API."""

from __future__ import annotations

import pytest
from _plan_fixtures import only, plan_mod, replicas, rules, run

OPEN = {"key_set": False, "anonymous": False, "bind": "*", "port": 8080, "tls": False}
rules_api = plan_mod.rules_api


def frontend(key="", anonymous=False, bind="*", port=8080):
    """One proxy node's frontend as plugins/action/serving_plan.py gives it (never the key: its shape)."""
    shape = rules_api.key_shape(key)
    return {"key_set": bool(key), "key_shape": shape, "anonymous": anonymous, "bind": bind, "port": port}


def test_api_closed():
    violation = only(run(replicas(), api=OPEN), "api_closed")
    assert violation["value"] == "*:8080" and "Set gb10_api_key" in violation["message"]
    assert "proxy_anonymous: true" in violation["message"]
    assert rules(run(replicas(), api={**OPEN, "key_set": True})) == []
    assert rules(run(replicas(), api={**OPEN, "bind": "127.0.0.1"})) == []
    assert rules(run(replicas(), api=None)) == []  # no proxy group: nothing to say


def test_api_closed_judges_each_proxy_node_by_its_own_variables():
    """Issue 41 item 2: the rule roles/proxy's preflight held in Jinja (its assert on gb10_api_key, proxy_anonymous and
    gb10_proxy_bind_address, per proxy node) is the plan's alone: each proxy node is judged, and named."""
    frontends = {
        "spark-a": frontend(),
        "spark-b": frontend(key="s3cr3t-canary-0a1b"),
        "spark-c": frontend(anonymous=True),
        "spark-d": frontend(bind="127.0.0.1"),
        "spark-e": frontend(bind="10.77.0.12", port=8443),
    }
    planned = run(replicas(), api={**OPEN, "key_set": True, "frontends": frontends})
    found = [(v["node"], v["value"]) for v in planned["violations"] if v["rule"] == "api_closed"]
    assert found == [("spark-a", "*:8080"), ("spark-e", "10.77.0.12:8443")]
    assert (
        "gb10_api_key is empty and the proxy binds *:8080 (gb10_proxy_bind_address)"
        in planned["violations"][0]["message"]
    )
    assert "frontends" not in planned["api"]  # what clients read stays {key_set, anonymous, bind, port, tls, ...}


@pytest.mark.parametrize(
    ("bind", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.1", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("*", False),
        ("", False),
        ("0.0.0.0", False),
        ("::", False),
        ("::1abc", False),
        ("localhost.example.org", False),
        ("10.77.0.11", False),
        ("spark-1", False),
    ],
)
def test_api_closed_counts_only_loopback_as_closed(bind, loopback):
    # as roles/proxy's preflight did: ^(127\.|::1$|localhost$); a name that starts with localhost is not loopback
    assert rules_api.is_loopback(bind) is loopback
    planned = run(replicas(), api={**OPEN, "frontends": {"spark-a": frontend(bind=bind)}})
    assert (rules(planned) == []) is loopback


def test_api_key_word():
    """Issue 18: HAProxy reads the key file line by line; a key with whitespace or beyond printable ASCII matches no
    request. Refused per proxy node, with the key's shape and the fix, never the key."""
    assert rules_api.key_shape("two words-canary-9f") == {"length": 19, "unmatchable": 1}
    assert rules_api.key_shape(None) == {"length": 0, "unmatchable": 0}
    for key in ("two words-canary-9f", "tab\tcanary-9f", "line\ncanary-9f", "caf\u00e9-canary-9f", "nul\x00canary-9f"):
        planned = run(replicas(), api={**OPEN, "key_set": True, "frontends": {"spark-b": frontend(key=key)}})
        violation = only(planned, "api_key_word")
        assert violation["node"] == "spark-b"
        assert (
            violation["value"]
            == f"gb10_api_key: {len(key)} characters, 1 of them whitespace or outside printable ASCII"
        )
        assert "openssl rand -hex 32" in violation["message"] and "line by line" in violation["message"]
        assert "canary-9f" not in repr(planned)
    for key in ("s3cr3t-canary-0a1b", "!~" * 16, ""):
        assert "api_key_word" not in rules(run(replicas(), api={**OPEN, "frontends": {"spark-b": frontend(key=key)}}))


def test_the_plan_prints_who_may_use_the_api():
    closed = plan_mod.format_plan(run(replicas(), api={**OPEN, "key_set": True, "tls": True}))
    assert "api: proxy *:8080 https, key required (Authorization: Bearer gb10_api_key)" in closed
    anonymous = run(replicas(), api={**OPEN, "anonymous": True})
    assert anonymous["violations"] == [] and anonymous["api"]["anonymous"] is True
    assert "ANONYMOUS (proxy_anonymous: true)" in plan_mod.format_plan(anonymous)


def test_the_plan_states_the_url_and_ca_every_client_of_the_proxy_uses():
    """Issue 18, item 2: the client URL once, in the plan (bench.yml, roles/proxy_vip read it): https with a
    certificate, the floating address where there is one, the CA the clients verify with; never the key."""
    given = {**OPEN, "key_set": True, "fabric_address": "10.77.0.11"}
    plain = run(replicas(), api=given)["api"]
    assert (plain["scheme"], plain["url"], plain["ca"]) == ("http", "http://10.77.0.11:8080", "")
    tls = {**given, "tls": True, "ca": "/sim/tls/ca.pem", "vip_address": "10.77.0.10"}
    planned = run(replicas(), api=tls)
    assert planned["api"]["url"] == "https://10.77.0.10:8080" and planned["api"]["ca"] == "/sim/tls/ca.pem"
    assert set(planned["api"]) == {"key_set", "anonymous", "bind", "port", "tls", "scheme", "url", "ca"}
    text = plan_mod.format_plan(planned)
    assert "api: proxy *:8080 https, key required" in text
    assert "api url: https://10.77.0.10:8080 (certificate verified against proxy_tls_ca /sim/tls/ca.pem)" in text
    system = run(replicas(), api={**tls, "ca": ""})
    assert "verified against the system's trust store (no proxy_tls_ca)" in plan_mod.format_plan(system)
    # The name the operator gives (the certificate's DNS name) wins; a concrete bind address beats the fabric's; a CA
    # without TLS is no part of the plan; an IPv6 host is bracketed.
    assert run(replicas(), api={**tls, "client_host": "llm.example"})["api"]["url"] == "https://llm.example:8080"
    bound = run(replicas(), api={**given, "bind": "192.168.1.21", "port": 8443})["api"]
    assert bound["url"] == "http://192.168.1.21:8443"
    assert run(replicas(), api={**given, "ca": "/sim/tls/ca.pem"})["api"]["ca"] == ""
    assert run(replicas(), api={**given, "fabric_address": "fd00::11"})["api"]["url"] == "http://[fd00::11]:8080"
    assert run(replicas(), api={**OPEN, "key_set": True})["api"]["url"] == ""  # no address known: no URL


AFFINITY = {"mode": "header", "header": "X-Session-Id", "balance_factor": 150}


def test_proxy_affinity():
    """Issue 20, item 3: session affinity settings HAProxy could not use are refused, with the fix, before anything
    changes."""
    given = {**OPEN, "key_set": True}
    assert rules(run(replicas(), api={**given, "affinity": AFFINITY})) == []
    assert rules(run(replicas(), api={**given, "affinity": {**AFFINITY, "mode": "none", "header": "a b"}})) == []
    cases = [
        ({"mode": "sticky"}, "proxy_affinity=sticky", "set none"),
        ({"header": "X Session"}, "proxy_affinity_header=X Session", "letters, digits and '-'"),
        ({"header": "authorization"}, "proxy_affinity_header=authorization", "per conversation"),
        ({"balance_factor": 100}, "proxy_affinity_balance_factor=100", "101..1000"),
        ({"balance_factor": "150"}, "proxy_affinity_balance_factor=150", "101..1000"),
    ]
    for change, value, fix in cases:
        found = only(run(replicas(), api={**given, "affinity": {**AFFINITY, **change}}), "proxy_affinity")
        assert found["value"] == value and fix in found["message"], found


def test_the_plan_prints_the_affinity_mode_where_it_is_on():
    given = {**OPEN, "key_set": True}
    text = plan_mod.format_plan(run(replicas(), api={**given, "affinity": {**AFFINITY, "mode": "user"}}))
    assert "api affinity: user: a request with header X-Session-Id, else the body's user field" in text
    assert "150% of the average" in text
    off = plan_mod.format_plan(run(replicas(), api={**given, "affinity": {**AFFINITY, "mode": "none"}}))
    assert "api affinity" not in off
