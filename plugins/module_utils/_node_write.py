# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Compare and write files on a node, several in one module run (gb10.serving.node_files, gb10.serving.node_templates).

ansible.builtin.copy and ansible.builtin.template cost two module runs a file even when nothing changes (a stat, then
file for the attributes), about a second a file on the simulation (docs/converge-cost.md); these helpers let one
module run compare every file of a role and write only those whose bytes, mode, owner or group differ.
"""

from __future__ import annotations

import os
import shutil
import tempfile

# gb10.serving.node_templates' options, for its action plugin (on the controller) and its module (on the node).
FILE_OPTIONS = {
    "src": {"type": "str"},
    "vars": {"type": "dict"},
    "dest": {"type": "path", "required": True},
    # no_log: the module logs its arguments to the node's journal ("Invoked with ..."); a rendered file is no secret
    # (those are written by no_log tasks), but the journal is no place for every file a converge compares.
    "content": {"type": "str", "no_log": True},
    "file": {"type": "str"},
    "mode": {"type": "str", "required": True},
    "owner": {"type": "str", "default": "root"},
    "group": {"type": "str", "default": "root"},
    "validate": {"type": "str"},
}
DIRECTORY_OPTIONS = {
    "path": {"type": "path", "required": True},
    "mode": {"type": "str", "required": True},
    "owner": {"type": "str", "default": "root"},
    "group": {"type": "str", "default": "root"},
}


def current(path):
    """The file's bytes, or None where it does not exist."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def text(data):
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def diff_of(path, before, after):
    """The diff entry Ansible shows for a file written from ``before`` (None: absent) to ``after``; ``before_header``
    is the node's path, as ansible.builtin.template reports it."""
    old, new = text(before or b""), text(after)
    if old is None or new is None:
        return {"prepared": f"{path}: binary content changed\n"}
    return {"before_header": path, "after_header": path, "before": old, "after": new}


def attributes(module, path, mode, owner, group):
    """Whether ``path``'s owner, group or mode differed (set unless in check mode)."""
    changed = module.set_owner_if_different(path, owner, False)
    changed = module.set_group_if_different(path, group, changed)
    return module.set_mode_if_different(path, mode, changed)


def put(module, path, data, mode, owner, group, diffs, write):
    """Whether ``path`` changed, or a refusal: where its bytes differ from ``data`` (its diff added to ``diffs`` in
    diff mode) ``write(module, path, data)`` writes it and returns None or a refusal's text, then its owner, group
    and mode are set; in check mode only reported. Returns (changed, refusal)."""
    before = current(path)
    changed = before != data
    if changed:
        if module._diff:
            diffs.append(diff_of(path, before, data))
        if not module.check_mode:
            refused = write(module, path, data)
            if refused:
                return changed, refused
    # in check mode a file not there yet has nothing to compare: its write is the change
    if not (before is None and module.check_mode) and attributes(module, path, mode, owner, group):
        changed = True
    return changed, None


def write_beside(module, path, data, prefix):
    """Write ``data`` to ``path`` through a temporary file in its folder and a rename."""
    handle, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=prefix)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        module.atomic_move(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


def write_validated(module, path, data, validate):
    """Write ``data`` to ``path`` after ``validate`` (a command line, ``%s`` the candidate file, as the ``validate``
    of ansible.builtin.template) passed on it in a private folder, so that nothing watching ``path``'s folder (systemd,
    udev) ever sees a candidate. Returns None, or the refusal's text."""
    folder = tempfile.mkdtemp(prefix="gb10-node-templates-")
    try:
        candidate = os.path.join(folder, os.path.basename(path))
        with open(candidate, "wb") as out:
            out.write(data)
        if validate:
            rc, out, err = module.run_command(validate % candidate)
            if rc != 0:
                said = (err or out).strip()
                return f"validate {validate!r} refused {path} (rc={rc})" + (f": {said}" if said else "")
        module.atomic_move(candidate, path)
        return None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def validate_problems(entries):
    """What is wrong with the files asked for (absolute destinations, each once, a ``validate`` naming ``%s``)."""
    problems, seen = [], set()
    for entry in entries:
        dest = entry.get("dest") or ""
        if not os.path.isabs(dest):
            problems.append(f"dest {dest!r} is not an absolute path")
        elif os.path.normpath(dest) in seen:
            problems.append(f"two files write {dest}")
        seen.add(os.path.normpath(dest))
        validate = entry.get("validate")
        if validate and validate.count("%s") != 1:
            problems.append(f"validate {validate!r} of {dest} must name the candidate file as %s exactly once")
    return problems


def template_each(items, src, dest, mode="0644", validate=None):
    """gb10.serving.node_templates' files for one template written once per item (what a loop over
    ansible.builtin.template wrote): ``dest`` a format string of ``{item}``, the template's ``item`` the item."""
    found = []
    for item in items:
        try:
            path = dest.format(item=item)
        except (KeyError, IndexError, AttributeError, TypeError) as err:
            raise ValueError(f"node_template_each: dest {dest!r} does not format with item {item!r}: {err}") from err
        entry = {"src": src, "dest": path, "mode": mode, "vars": {"item": item}}
        if validate:
            entry["validate"] = validate
        found.append(entry)
    return found
