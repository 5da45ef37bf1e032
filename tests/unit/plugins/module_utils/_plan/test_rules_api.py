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
