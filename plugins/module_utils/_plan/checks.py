# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The bodies that many rules share, so that a rule of that shape states only what it judges and what it says.

Each rule stays its own ``@rule`` function (one name, one test); these only build its violations.
"""

from __future__ import annotations

from .violation import ALL_NODES, violation


def refuse(wrong, rule, value, message):
    """The violation of ``rule`` (all nodes) when ``wrong``: the body of a rule on one profile-wide value."""
    if wrong:
        yield violation(ALL_NODES, rule, value, message)


def refuse_given(ctx, field, wrong, rule, message):
    """refuse() of the profile's own ``field`` as the operator gave it (``{given!r}`` in ``message``)."""
    given = ctx.profile.get(field)
    return refuse(wrong, rule, given, message.format(given=given))


def unmatched(rule, pattern, value, message):
    """The violation of ``rule`` (all nodes) when ``pattern`` does not match ``value``; an empty value is None."""
    return refuse(not pattern.match(str(value)), rule, value or None, message)


def each_node(ctx, rule, wrong, value, message):
    """A violation of ``rule`` on each host whose per-node figures are ``wrong``, of the ``value`` picked from them.

    ``message`` is formatted with ``host``, ``value`` and the figures' own keys (``{given_snapshot!r}``).
    """
    for host in ctx.hosts:
        figures = ctx.per_node[host]
        if wrong(figures):
            found = value(figures)
            yield violation(host, rule, found, message.format(host=host, value=found, **figures))
