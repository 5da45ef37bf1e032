# Copyright: gb10.serving maintainers
# Apache-2.0
"""Every module's DOCUMENTATION, EXAMPLES and RETURN parse as YAML (ansible-lint only logs a broken one)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

MODULES = sorted((Path(__file__).resolve().parents[4] / "plugins" / "modules").glob("*.py"))


BLOCKS = ("DOCUMENTATION", "EXAMPLES", "RETURN")


def _docs(path):
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") in BLOCKS:
            yield node.targets[0].id, node.value.value


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.stem)
def test_documentation_parses(path):
    found = dict(_docs(path))
    assert set(found) == set(BLOCKS), f"{path.name} lacks {found.keys()}"
    documentation = yaml.safe_load(found["DOCUMENTATION"])
    assert documentation["module"] == path.stem
    assert documentation["short_description"]
    yaml.safe_load(found["EXAMPLES"])
    yaml.safe_load(found["RETURN"])
