# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 37, item 4: every role variable roles/monitoring writes into prometheus.yml, rules.yml, the targets and the
ARGS of /etc/default/prometheus and prometheus-node-exporter is checked by the preflight (roles/monitoring/tasks/
preflight.yml, run by the real ansible-playbook as the role runs it) before anything on a node changes: the
durations, the size, the ports and this node's gb10_fabric_address (the listen address) as one word of those files.
The targets are the plan's, dumped as YAML by to_nice_yaml. Each variable is tried with a line break and a quote."""

from __future__ import annotations

import json

import pytest
import yaml
from monitoring_render import ROLE, render
from template_words import public_variables as role_public_variables
from template_words import refusal
from test_monitoring_preflight import preflight

DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
ROLE_VARS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
CHECK = "Refuse a retention, interval, rate window, port or address Prometheus would not parse as one word"
BAD = {"a line break": "\n  - /tmp/evil-rules.yml", "a quote": '"'}
# Each template's public variables, the role's and roles/gb10's, read directly or through vars/main.yml
# (test_every_variable_a_template_writes_is_checked proves the lists complete).
TEMPLATE_VARIABLES = {
    "prometheus.yml.j2": ["monitoring_scrape_interval", "monitoring_evaluation_interval"],
    "rules.yml.j2": ["monitoring_rate_window"],
    "prometheus.default.j2": [
        "monitoring_retention_time",
        "monitoring_retention_size",
        "monitoring_prometheus_port",
        "gb10_fabric_address",
    ],
    "prometheus-node-exporter.default.j2": ["monitoring_node_exporter_port", "gb10_fabric_address"],
    # the plan's targets (each host's gb10_fabric_address parsed by ipaddress, each port an int) dumped as YAML
    "targets.yml.j2": ["monitoring_node_exporter_port", "gb10_proxy_metrics_port"],
}
GOOD = {**DEFAULTS, "gb10_fabric_address": "10.77.0.11", "monitoring_retention_size": "20GB"}


def public_variables(source):
    """The role's public variables ``source`` reads, directly or through vars/main.yml (template_words.py)."""
    return role_public_variables(source, ROLE_VARS, ("monitoring_", "gb10_"))


def test_pitfall_a_line_break_in_the_scrape_interval_adds_a_setting(tmp_path):
    # $ matched before a trailing line break: "15s" and a line of the operator's choosing passed the old check.
    interval = "15s\n  external_labels: {replica: evil}"
    config = yaml.safe_load(render("prometheus.yml.j2", monitoring_scrape_interval=interval))
    assert config["global"]["scrape_interval"] == "15s"
    assert config["global"]["external_labels"] == {"replica": "evil"}
    rc, out = preflight(tmp_path, monitoring_scrape_interval=interval)
    assert rc == 2, out[-3000:]
    msg = refusal(out)
    assert msg.startswith(f"localhost: monitoring_scrape_interval is {json.dumps(interval)}; set a Prometheus"), msg
    assert "e.g. 15s" in msg


@pytest.mark.parametrize("template", sorted(TEMPLATE_VARIABLES))
@pytest.mark.parametrize("kind", sorted(BAD))
def test_each_variable_of_each_template_refuses_a_line_break_and_a_quote(tmp_path, template, kind):
    names = [n for n in TEMPLATE_VARIABLES[template] if n != "gb10_proxy_metrics_port"]
    given = {name: f"{GOOD[name]}{BAD[kind]}" for name in names}
    rc, out = preflight(tmp_path, **given)
    assert rc == 2, out[-3000:]
    msg = refusal(out)
    assert msg.startswith("localhost: "), msg
    for name in names:
        assert f"{name} is {json.dumps(given[name])}; set " in msg, msg


def test_a_trailing_line_break_in_a_port_is_refused_though_argument_specs_take_it(tmp_path):
    rc, out = preflight(tmp_path, monitoring_prometheus_port="9090\n", monitoring_rate_window="1m\n")
    assert rc == 2, out[-3000:]
    msg = refusal(out)
    assert 'monitoring_prometheus_port is "9090\\n"; set a whole number, e.g. 9090' in msg
    assert 'monitoring_rate_window is "1m\\n"' in msg


def test_the_proxy_metrics_port_reaches_the_targets_as_an_int():
    # gb10_proxy_metrics_port (roles/gb10's) reaches targets.yml only through the plan's filter, as int(): the
    # targets are YAML that to_nice_yaml dumps, so no value can add a line of its own.
    assert "map('int')" in ROLE_VARS["_monitoring_proxy_ports"]
    assert "monitoring_node_exporter_port | int" in ROLE_VARS["_monitoring_targets"]


def test_values_at_the_edge_of_the_patterns_pass(tmp_path):
    rc, out = preflight(
        tmp_path,
        monitoring_retention_time="1y2w3d4h5m6s7ms",
        monitoring_retention_size="512MB",
        monitoring_scrape_interval="500ms",
        monitoring_rate_window="90s",
        monitoring_prometheus_port="9091",
    )
    assert rc == 0, out[-3000:]
    rc, out = preflight(tmp_path, monitoring_retention_size="")
    assert rc == 0, out[-3000:]


def test_every_variable_a_template_writes_is_checked():
    tasks = yaml.safe_load((ROLE / "tasks" / "preflight.yml").read_text())
    task = next(t for t in tasks if t["name"] == CHECK)
    checked = {word[0] for word in task["vars"]["__monitoring_words"]}
    for template, names in TEMPLATE_VARIABLES.items():
        written = public_variables((ROLE / "templates" / template).read_text())
        assert written == set(names), template
        assert written - {"gb10_proxy_metrics_port"} <= checked, template
    assert sorted(p.name for p in (ROLE / "templates").iterdir()) == sorted(TEMPLATE_VARIABLES)
    # the patterns end in \Z: $ matches before a trailing line break
    assert ROLE_VARS["_monitoring_duration_re"].endswith("\\Z") and ROLE_VARS["_monitoring_size_re"].endswith("\\Z")
