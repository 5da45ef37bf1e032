# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/serving's templates rendered by plain Jinja with the collection's own filters, for the serving role's unit
tests (the units, the watchdog's)."""

from __future__ import annotations

from pathlib import Path

import jinja2
import yaml

from ansible_collections.gb10.serving.plugins.filter.serving_units import FilterModule

ROLE = Path(__file__).resolve().parents[4] / "roles" / "serving"
# What the watchdog's unit reads besides the role's defaults, as the role's vars give it on a node at 192.168.200.11.
WATCHDOG_VARS = {
    "_serving_watchdog_bin": "/usr/local/libexec/gb10-serving-watchdog",
    "_serving_health_url": "http://192.168.200.11:8000/health",
    "_serving_completions_url": "http://192.168.200.11:8000/v1/completions",
    "_serving_model_name": "tiny-moe",
    "_serving_secrets_env_file": "/etc/gb10/serving/secrets.env",
    "_serving_metrics_url": "http://192.168.200.11:8000/metrics",
    "_serving_chat_url": "http://192.168.200.11:8000/v1/chat/completions",
    # the site runs no warm agent unless a test gives the engine unit that has one
    "_serving_node_warms": [],
    "_serving_raylet_healthz_url": "http://127.0.0.1:52365/api/local_raylet_healthz",
}
AGENT_BIN = "/usr/local/libexec/gb10-warm-agent"
# The engine unit's ExecStop script where the site runs warm agents: a plain string of vars/main.yml.
STOP_SCRIPT = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["_serving_stop_script"]


def environment():
    """The role's templates, the collection's filters under their FQCN, undefined variables an error."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), undefined=jinja2.StrictUndefined)
    env.filters.update({f"gb10.serving.{name}": f for name, f in FilterModule().filters().items()})
    return env


def plain_defaults():
    """The role's defaults that are values, not templates of other variables."""
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    return {k: v for k, v in defaults.items() if not str(v).startswith("{{")}


def render_watchdog(kind, watchdog, **variables):
    """gb10-watchdog.<kind>.j2 for one of the plan's watchdogs (``item`` is (watchdog, kind), as configure.yml
    loops)."""
    values = {**plain_defaults(), "ansible_managed": "managed", **WATCHDOG_VARS, **variables}
    return environment().get_template(f"gb10-watchdog.{kind}.j2").render(**values, item=(watchdog, kind))


def render_warm_agent(kind, unit, **variables):
    """gb10-warm-agent.<kind>.j2 for the plan's engine unit that has a warm agent (``item`` is (unit, kind), as
    configure.yml loops)."""
    values = {
        **plain_defaults(),
        "ansible_managed": "managed",
        "_serving_warm_agent_bin": AGENT_BIN,
        "gb10_warm_agent_port": 8009,
        "gb10_fabric_address": "192.168.200.11",
        **variables,
    }
    return environment().get_template(f"gb10-warm-agent.{kind}.j2").render(**values, item=(unit, kind))
