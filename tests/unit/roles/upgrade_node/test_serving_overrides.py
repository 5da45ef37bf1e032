# Copyright: gb10.serving maintainers
# Apache-2.0
"""The rolling upgrade's include of the serving role overrides only the waits of its own run, never a value the role
writes into a file on the node (issue 37 item 3): serving_warmup_timeout reached the watchdog unit (TimeoutStartSec,
--warmup-timeout), so after every upgrade site.yml, and its check mode, found both nodes' watchdog units drifted
(measured on the simulation: TimeoutStartSec 335 against 635, changed=2 per node)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[4]
ROLES = REPO / "roles"


def serving_includes():
    """The vars of every task of roles/upgrade_node that includes the serving role (its main tasks)."""
    found = []
    for path in sorted((ROLES / "upgrade_node" / "tasks").glob("*.yml")):
        for task in yaml.safe_load(path.read_text()) or []:
            include = task.get("ansible.builtin.include_role") or task.get("ansible.builtin.import_role") or {}
            if include.get("name") == "gb10.serving.serving" and "tasks_from" not in include:
                found.append((path.name, task.get("name"), task.get("vars") or {}))
    return found


def written_names():
    """Every serving_* variable the serving role's templates (its units, env files, configuration) read."""
    texts = [path.read_text() for path in (ROLES / "serving" / "templates").glob("*.j2")]
    return set(re.findall(r"\bserving_[a-z0-9_]+\b", "\n".join(texts)))


def test_the_upgrade_overrides_no_value_of_the_serving_units():
    includes = serving_includes()
    assert includes, "roles/upgrade_node no longer includes the serving role: this test proves nothing"
    written = written_names()
    assert "serving_warmup_timeout" in written, "the watchdog template no longer reads it: update this test"
    for file, task, overrides in includes:
        leaked = sorted(set(overrides) & written)
        assert not leaked, f"{file} '{task}' overrides {leaked}, which the serving role writes into units"
