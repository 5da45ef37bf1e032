#!/usr/bin/env python
"""Fail when a role's meta/argument_specs.yml and defaults/main.yml disagree on keys or default values."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml


def problems_for(role: Path) -> list[str]:
    specs_file, defaults_file = role / "meta/argument_specs.yml", role / "defaults/main.yml"
    if not specs_file.exists():
        return [f"{role.name}: meta/argument_specs.yml is missing"]
    specs = yaml.safe_load(specs_file.read_text())["argument_specs"]["main"].get("options", {})
    defaults = yaml.safe_load(defaults_file.read_text()) if defaults_file.exists() else {}
    defaults = defaults or {}
    found = []
    for key in sorted(set(specs) ^ set(defaults)):
        where = "argument_specs only" if key in specs else "defaults only"
        # A required option has no default on purpose.
        if key in specs and specs[key].get("required"):
            continue
        found.append(f"{role.name}: {key} is in {where}")
    for key in sorted(set(specs) & set(defaults)):
        if specs[key].get("default") != defaults[key]:
            found.append(f"{role.name}: {key} default {specs[key].get('default')!r} != defaults {defaults[key]!r}")
    return found


def main() -> int:
    roles = sorted(p for p in Path("roles").iterdir() if p.is_dir())
    found = [problem for role in roles for problem in problems_for(role)]
    for problem in found:
        print(problem)
    print(f"argument_specs: {len(roles)} roles checked, {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
