# Copyright: gb10.serving maintainers
# Apache-2.0
"""What every role's template-words test (issue 37 item 4: a line break or a quote in a role variable written bare
into a config file, a unit or a Dockerfile) reads the same way: the refusal a preflight printed, and the role's
public variables a template writes, directly or through the role's vars/main.yml."""

from __future__ import annotations

import json
import re

import jinja2
import jinja2.meta

_FAILED = re.compile(r"FAILED! => (\{.*\})$", re.M)


def refusal(out):
    """The msg of the failed task (the JSON after FAILED! =>) in ansible-playbook's output."""
    found = _FAILED.search(out)
    assert found, out[-3000:]
    return json.loads(found.group(1))["msg"]


class AnyName(dict):
    """Every filter or test name known: find_undeclared_variables compiles the source."""

    def __contains__(self, name):
        return True

    def get(self, name, default=None):
        return super().get(name) or (lambda *args, **kwargs: None)


def strings(value):
    """Every string in a vars/main.yml value, however nested."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings(v)]
    return [value] if isinstance(value, str) else []


def public_variables(source, role_vars, prefixes, seen=()):
    """The public variables (names starting with one of ``prefixes``, gb10_plan aside) a template reads, directly
    or through the role's private ``role_vars`` (vars/main.yml)."""
    env = jinja2.Environment()
    env.filters, env.tests = AnyName(env.filters), AnyName(env.tests)  # Ansible's filters (dict2items) parse too
    names = jinja2.meta.find_undeclared_variables(env.parse(source))
    found = {n for n in names if n.startswith(tuple(prefixes)) and n != "gb10_plan"}
    for name in sorted(n for n in names if n in role_vars and n not in seen):
        for text in strings(role_vars[name]):
            found |= public_variables(text, role_vars, prefixes, (*seen, name))
    return found
