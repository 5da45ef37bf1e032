# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The one shape of a plan violation, and the one text every planner and action plugin prints them as.

A violation is a plain dict (it travels in Ansible results and JSON): ``node`` (a host, or ``all``), ``rule``
(a name in the registry), ``value`` (what was found, or None), ``message`` (what is wrong, where, with the
numbers and the fix) and, only where a rule has one apart from the message, ``fix``.
"""

from __future__ import annotations

from . import registry

ALL_NODES = "all"


def violation(node, rule, value, message, fix=None):
    """One violation; ``rule`` must be registered (a name outside the registry is a bug, not a finding)."""
    if rule not in registry.RULES:
        raise ValueError(
            f"violation of unregistered rule {rule!r}: register it with @rule in plugins/module_utils/_plan"
        )
    found = {"node": node, "rule": rule, "value": value, "message": message}
    if fix:
        found["fix"] = fix
    return found


def line(found):
    """``- [node] rule: message`` (and the fix, where it is not already in the message)."""
    text = f"- [{found['node']}] {found['rule']}: {found['message']}"
    if found.get("fix"):
        text += f" Fix: {found['fix']}"
    return text


def format_violations(violations, what):
    """The failure text of a planner: the count, what was planned, that nothing changed, one line each."""
    lines = [f"{len(violations)} violation(s) of {what}; nothing was changed:"]
    lines.extend(line(found) for found in violations)
    return "\n".join(lines)
