# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""meta/ee-requirements.txt (what ansible-builder installs for this collection) declares exactly the third-party
packages the plugins import, in ranges that hold the versions the collection is tested with."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[3]
PLUGINS = ROOT / "plugins"
FIRST_PARTY = {"ansible", "ansible_collections"}


def _declared():
    lines = (ROOT / "meta" / "ee-requirements.txt").read_text().splitlines()
    return [Requirement(line.split("#", 1)[0].strip()) for line in lines if line.split("#", 1)[0].strip()]


def _imports():
    """{canonical top-level module name: [files importing it]} over every Python file under plugins/."""
    found = {}
    for path in sorted(PLUGINS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top not in FIRST_PARTY and top not in sys.stdlib_module_names:
                    found.setdefault(canonicalize_name(top), []).append(str(path.relative_to(ROOT)))
    return found


def test_execution_environment_points_at_the_requirements():
    meta = yaml.safe_load((ROOT / "meta" / "execution-environment.yml").read_text())
    assert meta["dependencies"]["python"] == "meta/ee-requirements.txt"
    for kind, path in meta["dependencies"].items():
        assert (ROOT / path).is_file(), f"{kind}: {path} is missing"


def test_every_declared_package_is_imported_by_a_plugin():
    imported = _imports()
    assert [str(req) for req in _declared() if canonicalize_name(req.name) not in imported] == []


def test_every_third_party_import_is_declared():
    declared = {canonicalize_name(req.name) for req in _declared()}
    assert {name: files for name, files in _imports().items() if name not in declared} == {}


def test_ranges_hold_the_pinned_versions():
    # requirements.txt (the development tool chain) is not shipped; in an installed copy this checks nothing more.
    pinned_file = ROOT / "requirements.txt"
    pins = {}
    if pinned_file.exists():
        for line in pinned_file.read_text().splitlines():
            line = line.split("#", 1)[0].strip()
            if "==" in line:
                req = Requirement(line)
                pins[canonicalize_name(req.name)] = next(iter(req.specifier)).version
    for req in _declared():
        if pinned_file.exists():
            assert canonicalize_name(req.name) in pins, f"{req.name} is not pinned in requirements.txt"
        pin = pins.get(canonicalize_name(req.name))
        assert pin is None or req.specifier.contains(pin, prereleases=True), f"{req} does not hold the pin {pin}"
