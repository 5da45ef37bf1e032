# Copyright: gb10.serving maintainers
# Apache-2.0
"""The proxy's preflight (roles/proxy/tasks/preflight.yml) run by ansible-playbook on localhost: the API closed by
default (issue 18, item 2). The rule is the plan's (rules_api.py: api_closed, api_key_word; issue 41 item 2): the
preflight reads the plan's verdict for its node and refuses with the plan's message, which never holds the key; it no
longer judges gb10_api_key, proxy_anonymous and gb10_proxy_bind_address itself (their cases are
tests/unit/plugins/module_utils/_plan/test_rules_api.py's, and the plan playbook's in tests/integration)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from task_file_runner import run_role_tasks

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "_plan"))
from _plan_fixtures import plan_mod, replicas, run

# The plan's part the preflight reads (roles/gb10's gb10_plan): one replica, on this host, and a judged frontend.
API = {"key_set": True, "anonymous": False, "bind": "*", "port": 8080, "tls": False}
PLAN = {
    "nodes": {"localhost": {"port": 8000, "max_num_seqs": 4}},
    "serving_hosts": ["localhost"],
    "api": API,
    "violations": [],
}


def run_preflight(tmp_path, plan=None, **given):
    """roles/proxy's tasks/preflight.yml as the role runs it (its defaults and vars/main.yml), on localhost."""
    variables = {"gb10_plan": plan or PLAN, "gb10_api_key": "", **given}
    hostvars = {"gb10_fabric_address": "127.0.0.1"}
    return run_role_tasks(
        tmp_path, "proxy", "preflight", variables, name="The role's preflight", hostvars=hostvars, args=["-v"]
    )


def verdict(key="", anonymous=False, bind="*", node="localhost"):
    """The plan's violations of the API rules for one proxy node's variables (the action plugin's frontends)."""
    frontend = {
        "key_set": bool(key),
        "key_shape": plan_mod.rules_api.key_shape(key),
        "anonymous": anonymous,
        "bind": bind,
        "port": 8080,
    }
    planned = run(replicas(), api={**API, "frontends": {node: frontend}})
    return [v for v in planned["violations"] if v["rule"] in ("api_closed", "api_key_word")]


def test_an_empty_key_beyond_loopback_is_refused_with_the_fix(tmp_path):
    violations = verdict()
    assert [v["rule"] for v in violations] == ["api_closed"]
    rc, out = run_preflight(tmp_path, plan={**PLAN, "violations": violations})
    assert rc == 2, out[-3000:]
    text = " ".join(out.split())
    assert "localhost: gb10_api_key is empty and the proxy binds *:8080 (gb10_proxy_bind_address)" in text
    assert "proxy_anonymous: true" in out


@pytest.mark.parametrize(
    "given",
    [{"anonymous": True}, {"bind": "127.0.0.1"}, {"key": "s3cr3t-canary-0a1b"}],
    ids=["anonymous on purpose", "loopback only", "a key"],
)
def test_a_key_or_an_explicit_choice_passes(tmp_path, given):
    violations = verdict(**given)
    assert violations == []
    rc, out = run_preflight(tmp_path, plan={**PLAN, "violations": violations}, gb10_api_key=given.get("key", ""))
    assert rc == 0, out[-3000:]
    assert "s3cr3t-canary-0a1b" not in out


def test_a_key_haproxy_could_not_match_is_refused_and_not_printed(tmp_path):
    violations = verdict(key="two words-canary-9f")
    assert [v["rule"] for v in violations] == ["api_key_word"]
    rc, out = run_preflight(tmp_path, plan={**PLAN, "violations": violations}, gb10_api_key="two words-canary-9f")
    assert rc == 2, out[-3000:]
    assert "whitespace or outside printable ASCII" in out
    assert "canary-9f" not in out


def test_another_proxy_nodes_refusal_is_that_nodes(tmp_path):
    rc, out = run_preflight(tmp_path, plan={**PLAN, "violations": verdict(node="spark-2")})
    assert rc == 0, out[-3000:]


def test_a_plan_that_judged_no_frontend_is_refused(tmp_path):
    rc, out = run_preflight(tmp_path, plan={**PLAN, "api": None}, gb10_api_key="k")
    assert rc == 2, out[-3000:]
    assert "localhost: the serving plan judged no public frontend" in " ".join(out.split())


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"proxy_affinity": "sticky"}, "proxy_affinity is 'sticky'; set none (least connections"),
        (
            {"proxy_affinity": "header", "proxy_affinity_header": "X Session"},
            "proxy_affinity_header is 'X Session', not an HTTP header name",
        ),
        (
            {"proxy_affinity": "user", "proxy_affinity_header": "Authorization"},
            "proxy_affinity_header is Authorization: every client sends the same Authorization",
        ),
        (
            {"proxy_affinity": "header", "proxy_affinity_balance_factor": 100},
            "proxy_affinity_balance_factor is 100; HAProxy's hash-balance-factor is a percentage of the average load,"
            " 101..1000",
        ),
    ],
    ids=["unknown mode", "no header name", "a header every request carries", "factor HAProxy refuses"],
)
def test_session_affinity_settings_haproxy_could_not_use_are_refused(tmp_path, given, said):
    # the plan's own rule (rules_api.affinity_problems) through the role's filter: its message, not a second copy
    rc, out = run_preflight(tmp_path, gb10_api_key="k", **given)
    assert rc == 2, out[-3000:]
    assert "localhost: session affinity: " + said in " ".join(out.split()), out[-3000:]


def test_session_affinity_on_passes(tmp_path):
    rc, out = run_preflight(tmp_path, gb10_api_key="k", proxy_affinity="user", proxy_affinity_balance_factor=125)
    assert rc == 0, out[-3000:]
