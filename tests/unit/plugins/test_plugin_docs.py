# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Every plugin of the collection is documented where ansible-doc looks, and ansible-doc reads it.

The plugins are found by walking plugins/<type>/ and, for filter and test plugins, each file's own filters() or
tests() map (a file may define several; ansible-core then reads each one's docs from plugins/filter/<name>.yml, and
a DOCUMENTATION inside the file would be shown for every filter it defines). Each one is then read by ansible-doc
itself: ``ansible-doc --metadata-dump`` (its loader, the sidecar lookup, the doc fragments) and the plain text view
(``ansible-doc -t TYPE NAME``, which fails on docs that --json still returns).

GB10_DOCS_COLLECTIONS_PATH points the test at another collections path (scripts/check_package.sh: the collection
installed from its built tarball); by default it reads the checkout through collections/ (make collections), or
the installed copy this file sits in.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import cache

import pytest
import yaml
from ansible_doc_support import COLLECTION, COLLECTIONS_PATH, ansible_doc

NAMESPACE, NAME = "gb10", "serving"
PREFIX = f"{NAMESPACE}.{NAME}."

# plugins/<dir> -> ansible-doc's plugin type, for every type ansible-doc documents.
DOC_TYPES = {
    "modules": "module",
    "filter": "filter",
    "test": "test",
    "lookup": "lookup",
    "inventory": "inventory",
    "callback": "callback",
    "connection": "connection",
    "become": "become",
    "cache": "cache",
    "cliconf": "cliconf",
    "httpapi": "httpapi",
    "netconf": "netconf",
    "shell": "shell",
    "strategy": "strategy",
    "vars": "vars",
}
# Plugin dirs that ansible-doc does not document on their own (an action plugin is documented by its module).
UNDOCUMENTED = {"action", "doc_fragments", "module_utils", "terminal", "plugin_utils"}
# Jinja2 plugin dirs: one file may define several plugins, listed by this method of this class.
JINJA = {"filter": ("FilterModule", "filters"), "test": ("TestModule", "tests")}

_LIST_JINJA = """
import importlib, json, sys
sys.path.insert(0, sys.argv[1])
found = {}
for stem in sys.argv[4:]:
    module = importlib.import_module(f"ansible_collections.gb10.serving.plugins.{sys.argv[2]}.{stem}")
    cls, method = sys.argv[3].split(".")
    found[stem] = sorted(getattr(getattr(module, cls)(), method)())
print(json.dumps(found))
"""


def _walk():
    """[(ansible-doc type, fqcn)] from the collection's files."""
    found = []
    plugins = COLLECTION / "plugins"
    for folder in sorted(p for p in plugins.iterdir() if p.is_dir() and p.name != "__pycache__"):
        if folder.name not in DOC_TYPES:
            continue
        files = sorted(p for p in folder.glob("*.py") if p.name != "__init__.py")
        if folder.name in JINJA:
            cls, method = JINJA[folder.name]
            listed = subprocess.run(
                [sys.executable, "-c", _LIST_JINJA, str(COLLECTIONS_PATH), folder.name, f"{cls}.{method}"]
                + [p.stem for p in files],
                capture_output=True,
                text=True,
                check=True,
            )
            for names in json.loads(listed.stdout).values():
                found += [(DOC_TYPES[folder.name], PREFIX + name) for name in names]
        else:
            found += [(DOC_TYPES[folder.name], PREFIX + p.stem) for p in files]
    return found


PLUGINS = _walk()


@cache
def metadata_dump():
    """{type: {fqcn: docs}} of every plugin and role of the collection, as ansible-doc itself enumerates and reads them
    (``--metadata-dump``: its loader, the filter/test sidecar lookup, the doc fragments); a plugin whose docs do not
    load holds ``{"error": ...}``."""
    run = ansible_doc("--metadata-dump", "--no-fail-on-errors", f"{NAMESPACE}.{NAME}")
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)["all"]


def _text_failures(plugin_type, names):
    """{fqcn: error} of plain `ansible-doc -t TYPE NAME`, which renders what --json only returns (a description line
    that YAML read as a mapping loads as JSON, and makes the text view exit 1)."""
    run = ansible_doc("-t", plugin_type, *names)
    if run.returncode == 0 and "[ERROR]" not in run.stderr:
        return {}
    if len(names) == 1:
        return {names[0]: f"ansible-doc rc={run.returncode}: {run.stderr.strip()}"}
    half = len(names) // 2
    return _text_failures(plugin_type, names[:half]) | _text_failures(plugin_type, names[half:])


@cache
def text_failures_of(plugin_type):
    return _text_failures(plugin_type, sorted(fqcn for kind, fqcn in PLUGINS if kind == plugin_type))


def test_the_walk_finds_plugins():
    kinds = {kind for kind, _fqcn in PLUGINS}
    assert {"module", "filter"} <= kinds, f"no modules or filters found under {COLLECTION}/plugins"


def test_every_plugin_dir_is_known():
    dirs = {p.name for p in (COLLECTION / "plugins").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert not dirs - set(DOC_TYPES) - UNDOCUMENTED, "a plugin type this test does not check"


@pytest.mark.parametrize("plugin_type", sorted({kind for kind, _fqcn in PLUGINS}))
def test_ansible_doc_finds_exactly_the_walked_plugins(plugin_type):
    walked = {fqcn for kind, fqcn in PLUGINS if kind == plugin_type}
    assert set(metadata_dump().get(plugin_type) or {}) == walked


def test_ansible_doc_finds_no_plugin_type_the_walk_misses():
    found = {kind for kind, entries in metadata_dump().items() if entries and kind not in ("keyword", "role")}
    assert found <= {kind for kind, _fqcn in PLUGINS}


@pytest.mark.parametrize(("plugin_type", "fqcn"), PLUGINS, ids=[f"{k}:{n}" for k, n in PLUGINS])
def test_ansible_doc_reads_the_plugin(plugin_type, fqcn):
    entry = (metadata_dump().get(plugin_type) or {}).get(fqcn)
    assert entry is not None, f"ansible-doc does not find {fqcn}"
    assert "error" not in entry, entry.get("error")
    assert fqcn not in text_failures_of(plugin_type), text_failures_of(plugin_type).get(fqcn)
    doc = entry["doc"]
    short = fqcn.removeprefix(PREFIX)
    # A filter or test shown with another plugin's docs is a multi-plugin file holding a DOCUMENTATION.
    shown = doc.get("module" if plugin_type == "module" else "name")
    assert shown == short, f"{fqcn} shows the docs of {shown} ({doc.get('filename')})"
    assert isinstance(doc.get("short_description"), str) and doc["short_description"].strip()
    description = doc.get("description")
    assert description, f"{fqcn} has no description"
    # ': ' inside a plain scalar turns a description line into a mapping (the YAML still loads).
    lines = description if isinstance(description, list) else [description]
    assert all(isinstance(line, str) for line in lines), f"{fqcn}: a description line is not text: {lines}"
    assert doc.get("author"), f"{fqcn} has no author"

    examples = entry.get("examples")
    assert isinstance(examples, str) and examples.strip(), f"{fqcn} has no EXAMPLES"
    if plugin_type == "callback":
        # Enabled in ansible.cfg, not called from a task, and it returns nothing: its example is the setting
        # (ansible.posix.profile_tasks' shape), and it has no RETURN.
        assert f"callbacks_enabled = {fqcn}" in examples, f"{fqcn}: EXAMPLES does not show how to enable it"
        return
    tasks = yaml.safe_load(examples)
    assert isinstance(tasks, list) and tasks, f"{fqcn}: EXAMPLES is not a list of tasks"
    assert all(isinstance(task, dict) and task.get("name") for task in tasks), f"{fqcn}: an example task has no name"

    returns = entry.get("return")
    assert isinstance(returns, dict), f"{fqcn}: RETURN is missing or does not parse to a mapping"
    if plugin_type in ("filter", "test", "lookup"):
        assert "_value" in returns, f"{fqcn}: RETURN documents no _value"
    for key, value in returns.items():
        assert isinstance(value, dict) and value.get("description"), f"{fqcn}: RETURN {key} has no description"


def test_every_action_plugin_is_documented_by_its_module():
    actions = sorted((COLLECTION / "plugins" / "action").glob("*.py"))
    modules = {p.stem for p in (COLLECTION / "plugins" / "modules").glob("*.py")}
    assert [p.stem for p in actions if p.stem != "__init__" and p.stem not in modules] == []
