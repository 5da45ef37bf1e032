# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The rule registry: the single list of rule names, each with the pitfall it comes from.

A rule is a function from a planning context to an iterable of violations of that rule, registered with
``@rule(name, pitfall=...)``. ``pitfall`` names the field report and section it prevents (``seed 004: ...``)
, ``issue NN: ...`` or ``input validation``. Rules run in registration order (the order of the ``rules_*`` imports in
``__init__.py``, then the order in each file), so a plan lists its violations in the same order every time.
"""

from __future__ import annotations

from collections import namedtuple

Rule = namedtuple("Rule", "name pitfall planner stage check")

RULES = {}

# stages of the serving plan: ``profile`` rules run before there is a profile to build a context from.
STAGES = ("profile", "plan")


def rule(name, pitfall, planner="serving", stage="plan"):
    """Register the decorated function as the rule ``name`` (a name is registered once)."""
    if not pitfall:
        raise ValueError(f"rule {name!r} needs the pitfall it comes from (or 'input validation')")
    if stage not in STAGES:
        raise ValueError(f"rule {name!r}: stage {stage!r} is not one of {STAGES}")

    def register(check):
        if name in RULES:
            raise ValueError(
                f"rule {name!r} is registered twice ({RULES[name].check.__module__} and {check.__module__})"
            )
        RULES[name] = Rule(name, pitfall, planner, stage, check)
        return check

    return register


def run(ctx, planner="serving", stage="plan"):
    """Every violation of the planner's rules of ``stage``, rule by rule in registration order."""
    found = []
    for registered in RULES.values():
        if registered.planner != planner or registered.stage != stage:
            continue
        for item in registered.check(ctx) or ():
            if item["rule"] != registered.name:
                raise ValueError(f"rule {registered.name!r} produced a violation of {item['rule']!r}")
            found.append(item)
    return found


def names(planner=None):
    return [name for name, registered in RULES.items() if planner is None or registered.planner == planner]
