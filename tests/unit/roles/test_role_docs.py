# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Every role has meta/argument_specs.yml, and `ansible-doc -t role` reads each of its entry points.

scripts/check_argument_specs.py compares the specs with defaults/main.yml; this reads them the way ansible-doc does
(and ansible-core's role argument validation). GB10_DOCS_COLLECTIONS_PATH points it at another collections path
(scripts/check_package.sh: the collection installed from its built tarball); by default it reads the checkout
(or the installed copy this file sits in).
"""

from __future__ import annotations

import json
from functools import cache

import pytest
import yaml
from ansible_doc_support import COLLECTION, ansible_doc

ROLES = sorted(p.name for p in (COLLECTION / "roles").iterdir() if p.is_dir())


@cache
def role_docs():
    """{fqcn: docs} of every role, as ansible-doc itself enumerates and reads them (``--metadata-dump``)."""
    run = ansible_doc("--metadata-dump", "--no-fail-on-errors", "gb10.serving")
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)["all"].get("role") or {}


def test_roles_found():
    assert ROLES, f"no roles under {COLLECTION}/roles"


def test_ansible_doc_renders_every_role():
    run = ansible_doc("-t", "role", *(f"gb10.serving.{role}" for role in ROLES))
    assert run.returncode == 0 and "[ERROR]" not in run.stderr, run.stderr


def test_ansible_doc_finds_every_role():
    assert sorted(name.removeprefix("gb10.serving.") for name in role_docs()) == ROLES


@pytest.mark.parametrize("role", ROLES)
def test_ansible_doc_reads_every_entry_point(role):
    specs_file = COLLECTION / "roles" / role / "meta" / "argument_specs.yml"
    assert specs_file.is_file(), f"{role} has no meta/argument_specs.yml"
    specs = yaml.safe_load(specs_file.read_text())["argument_specs"]
    assert "main" in specs, f"{role}: argument_specs has no main entry point"

    entry = role_docs().get(f"gb10.serving.{role}")
    assert entry, f"ansible-doc does not find gb10.serving.{role}"
    assert "error" not in entry, entry.get("error")
    entry_points = entry["entry_points"]
    assert sorted(entry_points) == sorted(specs)
    for name, doc in entry_points.items():
        assert isinstance(doc.get("short_description"), str) and doc["short_description"].strip(), f"{role}:{name}"
        lines = doc.get("description") or []
        lines = lines if isinstance(lines, list) else [lines]
        assert all(isinstance(line, str) for line in lines), f"{role}:{name}: a description line is not text"
        for option, spec in (doc.get("options") or {}).items():
            assert spec.get("description"), f"{role}:{name}: option {option} has no description"
