# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 15: the plan is the only owner of the serving units' and containers' names (plugins/module_utils/_plan/
units.py). No task, handler, variable, default, template, playbook or molecule scenario spells one: each reads it
from the plan (gb10_plan / gb10_node_plan, hostvars['localhost'].gb10_serving_plan). Comments and the role
documentation (README.md, meta/argument_specs.yml descriptions) may name them."""

from __future__ import annotations

import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "tests" / "unit" / "plugins" / "module_utils" / "_plan"))
from _plan_fixtures import plan_mod

SITE = plan_mod.plan(None, {}, {})["units"]
CONTAINERS = {unit["container"] for role in plan_mod.units.ROLES for unit in plan_mod.units.node_units(role)["units"]}
NAMES = re.compile("|".join(re.escape(name) for name in sorted({*SITE["all"], *CONTAINERS}, key=len, reverse=True)))


def _sources():
    for folder in ("tasks", "handlers", "vars", "defaults", "templates"):
        yield from sorted((REPO / "roles").glob(f"*/{folder}/**/*"))
    yield from sorted((REPO / "playbooks").rglob("*.yml"))
    yield from sorted((REPO / "molecule").rglob("*.yml"))
    yield REPO / "site.yml"


def test_no_role_or_playbook_spells_a_unit_or_container_the_plan_names():
    spelled = []
    for path in _sources():
        if not path.is_file():
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if line.lstrip().startswith("#"):
                continue
            spelled += [f"{path.relative_to(REPO)}:{number}: {found}" for found in NAMES.findall(line)]
    assert spelled == []
