# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 37, item 4: every role variable roles/proxy writes into haproxy.cfg, its 503 page or the haproxy.service
drop-in is checked by the preflight (roles/proxy/tasks/preflight.yml, run by the real ansible-playbook) before
configure writes anything. Each template's variables are tried with a line break and a quote; each is refused,
naming the node, the variable, its value and the fix. Values at the edge of what the preflight lets through still
pass HAProxy's own check."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jinja2
import jinja2.meta
import pytest
import yaml
from haproxy_render import NEEDS_HAPROXY, ROLE, LiveHAProxy, render
from task_file_runner import run_role_tasks
from template_words import refusal

# The plan's part the preflight reads (roles/gb10's gb10_plan): one replica on this host, the public frontend judged
# (rules_api.py) with no violation.
PLAN = {
    "nodes": {"localhost": {"port": 8000, "max_num_seqs": 4}},
    "serving_hosts": ["localhost"],
    "api": {"key_set": True, "anonymous": False, "bind": "*", "port": 8080, "tls": False},
    "violations": [],
}
# The role's own defaults and the shared ones of roles/gb10 it writes (issue 41: the admin socket, backend, drain
# records' folder, ports and check path live there once).
SHARED = yaml.safe_load((ROLE.parent / "gb10" / "defaults" / "main.yml").read_text())
GB10_SPECS = yaml.safe_load((ROLE.parent / "gb10" / "meta" / "argument_specs.yml").read_text())["argument_specs"][
    "main"
]["options"]
PROXY_SHARED = {"gb10_proxy_" + name for name in ("admin_socket", "backend_name", "admin_state_dir", "port")}
PROXY_SHARED |= {"gb10_proxy_" + name for name in ("stats_address", "stats_port", "check_path", "bind_address")}
DEFAULTS = {
    **{name: SHARED[name] for name in PROXY_SHARED},
    **yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()),
}
CHECK = "Refuse a value haproxy.cfg or the haproxy.service drop-in could not hold as one word"
# What each template is written with, of the role's public variables (test_every_variable_a_template_writes_is_
# checked proves the lists complete). proxy_affinity has choices; proxy_tls_cert reaches haproxy.cfg as
# _proxy_tls_cert, checked by tasks/checks.yml (test_tls_preflight.py).
TEMPLATE_VARIABLES = {
    "haproxy.cfg.j2": [
        "gb10_proxy_check_path",
        "gb10_proxy_bind_address",
        "gb10_proxy_stats_address",
        "gb10_proxy_admin_socket",
        "proxy_server_state_file",
        "gb10_proxy_admin_state_dir",
        "gb10_proxy_backend_name",
        "proxy_check_inter",
        "proxy_timeout_queue",
        "proxy_timeout_connect",
        "proxy_timeout_client",
        "proxy_timeout_server",
        "gb10_proxy_port",
        "gb10_proxy_stats_port",
        "proxy_maxconn",
        "proxy_retries",
        "proxy_request_buffer",
        "proxy_check_fall",
        "proxy_check_rise",
    ],
    "503-queue.http.j2": ["proxy_timeout_queue"],
    "gb10-server-state.conf.j2": ["proxy_server_state_file", "gb10_proxy_admin_state_dir", "gb10_proxy_admin_socket"],
}
# A list of keywords, each checked against HAProxy's retry-on keywords (test_retry_on_... below).
LIST_VARIABLES = ["proxy_retry_on"]
# Used by haproxy.cfg only with session affinity on; the plan's affinity rule reads them too.
AFFINITY_VARIABLES = ["proxy_affinity_header", "proxy_affinity_balance_factor"]
BAD = {"a line break": "\n    server evil 203.0.113.66:80", "a quote": '"'}


def preflight(tmp_path, **given):
    """(rc, output) of the role's tasks/preflight.yml on localhost, with a key so the closed API passes."""
    variables = {"gb10_plan": PLAN, "gb10_api_key": "unit-test-key", **given}
    return run_role_tasks(
        tmp_path,
        "proxy",
        "preflight",
        variables,
        name="The role's preflight",
        hostvars={"gb10_fabric_address": "127.0.0.1"},
    )


def spoiled(name, bad):
    return f"{DEFAULTS[name]}{bad}"


def template_variables(template):
    """The role's public variables ``template`` reads (Jinja's own parse, comments and plain text left out)."""
    env = jinja2.Environment()
    parsed = env.parse((ROLE / "templates" / template).read_text())
    return {
        name
        for name in jinja2.meta.find_undeclared_variables(parsed)
        if name.startswith("proxy_") or name in PROXY_SHARED
    }


def checked_variables():
    """The variables the preflight's one-word check lists."""
    tasks = yaml.safe_load((ROLE / "tasks" / "preflight.yml").read_text())
    task = next(t for t in tasks if t["name"] == CHECK)
    return [word[0] for word in task["vars"]["__proxy_words"]]


def test_pitfall_newline_in_proxy_check_path_adds_directives(tmp_path):
    # Measured (issue 37): the path is written bare after `option httpchk GET`, so a line break in it starts a
    # directive of its own: here a server of the operator's choosing in the replicas' backend.
    path = "/health" + BAD["a line break"]
    backend = render(gb10_proxy_check_path=path).split("backend vllm\n", 1)[1]
    assert re.search(r"^    server evil 203\.0\.113\.66:80$", backend, re.M)
    # Refused before configure writes anything, with the node, the variable, the value and the fix.
    rc, out = preflight(tmp_path, gb10_proxy_check_path=path)
    assert rc == 2, out[-3000:]
    msg = refusal(out)
    assert msg.startswith("localhost: gb10_proxy_check_path is " + json.dumps(path) + "; set an absolute URL path"), msg
    assert "e.g. /health" in msg


@NEEDS_HAPROXY
def test_a_directive_added_through_proxy_check_path_passes_haproxy_check_unnoticed(tmp_path):
    # Why the preflight must refuse it: the configure step's `haproxy -c` validation takes the added server.
    checked = LiveHAProxy(tmp_path, gb10_proxy_check_path="/health" + BAD["a line break"]).check()
    assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("template", sorted(TEMPLATE_VARIABLES))
@pytest.mark.parametrize("kind", sorted(BAD))
def test_each_variable_of_each_template_refuses_a_line_break_and_a_quote(tmp_path, template, kind):
    names = TEMPLATE_VARIABLES[template]
    given = {name: spoiled(name, BAD[kind]) for name in names}
    # The template is written with each value as given: a marker of each shows up in the rendered file.
    rendered = render(template=template, **{name: f"{DEFAULTS[name]}-mark-{name}" for name in names})
    for name in names:
        assert f"-mark-{name}" in rendered, f"{template} does not write {name}"
    # roles/gb10's whole-number ports (argument_specs int, the role's dependency) are refused by its argument
    # validation before any task of the role runs, as every play that lists it runs it: a value int() cannot read
    # never reaches the preflight. The rest are the preflight's one-word check's.
    typed = [name for name in names if GB10_SPECS.get(name, {}).get("type") == "int"]
    rc, out = preflight(tmp_path, **{name: given[name] for name in typed})
    assert not typed or rc == 2, out[-3000:]
    for name in typed:
        assert f"argument '{name}' is of type str and we were unable to convert to int" in out, out[-3000:]
    words = {name: given[name] for name in names if name not in typed}
    rc, out = preflight(tmp_path, **words)
    assert rc == 2, out[-3000:]
    msg = refusal(out)
    assert msg.startswith("localhost: "), msg
    for name in words:
        assert f"{name} is {json.dumps(given[name])}; set " in msg, msg


@pytest.mark.parametrize("kind", sorted(BAD))
@pytest.mark.parametrize("name", AFFINITY_VARIABLES)
def test_session_affinity_values_refuse_a_line_break_and_a_quote(tmp_path, name, kind):
    # A quote is the plan's affinity rule's refusal (test_preflight_closed.py); a trailing line break slips past its
    # pattern (`$` matches before it) and is this check's.
    value = spoiled(name, "\n" if kind == "a line break" else BAD[kind])
    rc, out = preflight(tmp_path, proxy_affinity="header", **{name: value})
    assert rc == 2, out[-3000:]
    assert f"{name} is " in refusal(out)


@pytest.mark.parametrize(
    "value", [["conn-failure", "empty-response\n    server evil 203.0.113.66:80"], ["retry-everything"], "502", []]
)
def test_retry_on_refuses_a_keyword_haproxy_lacks_and_a_line_break(tmp_path, value):
    rc, out = preflight(tmp_path, proxy_retry_on=value)
    assert rc == 2, out[-3000:]
    msg = refusal(out)
    assert msg.startswith("localhost: proxy_retry_on is "), msg
    assert "each entry is one of HAProxy's retry-on keywords" in msg


def test_trailing_line_break_in_a_number_is_refused_though_argument_specs_take_it(tmp_path):
    # ansible-core's role argument validation checks int with int(), which strips whitespace, and does not replace
    # the value: "3\n" would be written as it is (fall 3<line break> rise 1: rise on a line of its own).
    rc, out = preflight(tmp_path, proxy_check_fall="3\n", gb10_proxy_port=True)
    assert rc == 2, out[-3000:]
    msg = refusal(out)
    assert 'proxy_check_fall is "3\\n"; set a whole number, e.g. 3' in msg
    assert 'gb10_proxy_port is "True"; set a whole number, e.g. 8080' in msg


EDGE = {
    "gb10_proxy_check_path": "/v1/models.json_~%2F-x",
    "gb10_proxy_bind_address": "0.0.0.0",
    "gb10_proxy_stats_address": "::1",
    "gb10_proxy_admin_state_dir": "/var/lib/gb10/proxy-admin_2@site,a=b:c",
    "gb10_proxy_backend_name": "vllm.pair_2-a",
    "proxy_check_inter": "1500ms",
    "proxy_timeout_queue": "2m",
    "proxy_timeout_client": "1h",
    "proxy_affinity": "user",
    "proxy_affinity_header": "X-Conversation-7",
}


def test_values_at_the_edge_of_the_patterns_pass_the_preflight(tmp_path):
    rc, out = preflight(tmp_path, **EDGE)
    assert rc == 0, out[-3000:]


@NEEDS_HAPROXY
def test_values_at_the_edge_of_the_patterns_pass_haproxy_check(tmp_path):
    edge = {k: v for k, v in EDGE.items() if k not in ("gb10_proxy_bind_address", "gb10_proxy_stats_address")}
    checked = LiveHAProxy(tmp_path, **edge).check()
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_variable_a_template_writes_is_checked():
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    checked = set(checked_variables())
    for template in TEMPLATE_VARIABLES:
        written = template_variables(template)
        assert written - {"proxy_affinity"} == set(TEMPLATE_VARIABLES[template]) | (
            set(AFFINITY_VARIABLES + LIST_VARIABLES) if template == "haproxy.cfg.j2" else set()
        ), template
        for name in set(written) - set(LIST_VARIABLES):
            assert name in checked or specs[name].get("choices") or specs[name]["type"] == "bool", name
    assert Path(ROLE / "templates").is_dir() and sorted(p.name for p in (ROLE / "templates").iterdir()) == sorted(
        TEMPLATE_VARIABLES
    )
