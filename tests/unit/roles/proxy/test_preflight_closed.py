# Copyright: gb10.serving maintainers
# Apache-2.0
"""The proxy's preflight (roles/proxy/tasks/preflight.yml) run by ansible-playbook on localhost: the API closed by
default (issue 18, item 2). An empty gb10_api_key beyond loopback is refused unless proxy_anonymous: true; a key
HAProxy's key file could not hold (whitespace, beyond printable ASCII) is refused; and the refusal never prints it."""

from __future__ import annotations

import pytest
from task_file_runner import run_role_tasks

# The plan's part the preflight reads (roles/gb10's gb10_plan): one replica, on this host.
PLAN = {"nodes": {"localhost": {"port": 8000, "max_num_seqs": 4}}, "serving_hosts": ["localhost"]}


def run_preflight(tmp_path, **given):
    """roles/proxy's tasks/preflight.yml as the role runs it (its defaults and vars/main.yml), on localhost."""
    variables = {"gb10_plan": PLAN, "gb10_api_key": "", **given}
    hostvars = {"gb10_fabric_address": "127.0.0.1"}
    return run_role_tasks(
        tmp_path, "proxy", "preflight", variables, name="The role's preflight", hostvars=hostvars, args=["-v"]
    )


def test_an_empty_key_beyond_loopback_is_refused_with_the_fix(tmp_path):
    rc, out = run_preflight(tmp_path)
    assert rc == 2, out[-3000:]
    assert "localhost: gb10_api_key is empty and gb10_proxy_bind_address is *" in out
    assert "proxy_anonymous: true" in out


@pytest.mark.parametrize(
    "given",
    [{"proxy_anonymous": True}, {"gb10_proxy_bind_address": "127.0.0.1"}, {"gb10_api_key": "s3cr3t-canary-0a1b"}],
    ids=["anonymous on purpose", "loopback only", "a key"],
)
def test_a_key_or_an_explicit_choice_passes(tmp_path, given):
    rc, out = run_preflight(tmp_path, **given)
    assert rc == 0, out[-3000:]
    assert "s3cr3t-canary-0a1b" not in out


def test_a_key_haproxy_could_not_match_is_refused_and_not_printed(tmp_path):
    rc, out = run_preflight(tmp_path, gb10_api_key="two words-canary-9f")
    assert rc == 2, out[-3000:]
    assert "whitespace or characters outside printable ASCII" in out
    assert "canary-9f" not in out


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
