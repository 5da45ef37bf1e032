#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Module gb10.serving.node_templates: write a role's rendered templates on a node in one module run."""

from __future__ import annotations

DOCUMENTATION = r"""
module: node_templates
short_description: Write several templates and files of a role on a node in one module run
description:
  - Renders every template of O(files) on the controller as M(ansible.builtin.template) does (the role's
    C(templates/), the task's variables, C(ansible_managed), C(trim_blocks)) and compares and writes them all on the
    node in one module run, where M(ansible.builtin.template) makes two a file even when nothing changes.
  - A file is written only where its bytes, mode, owner or group differ, in the order given. Its O(files[].validate)
    runs on the candidate in a private folder before it replaces the file (nothing watching the file's folder, such
    as systemd, sees a candidate); a refusal fails the task naming the file, and the files after it are left alone.
  - In check mode nothing is written and no O(files[].validate) runs (as M(ansible.builtin.template)); the files
    that would be written are reported, with their diff in diff mode.
  - Use C(no_log) on the task for files that hold secrets, whose text the diff would show.
options:
  directories:
    description:
      - Folders made before any file, where missing (with their missing parents, as M(ansible.builtin.file) makes
        them), and given their owner, group and mode.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: The folder (absolute).
        type: path
        required: true
      mode:
        description: Its mode (octal string).
        type: str
        required: true
      owner:
        description: Its owner.
        type: str
        default: root
      group:
        description: Its group.
        type: str
        default: root
  files:
    description: The files, in the order they are written.
    type: list
    elements: dict
    default: []
    suboptions:
      src:
        description:
          - The template, in the role's C(templates/) (read by the action plugin on the controller).
          - One of O(files[].src), O(files[].file) and O(files[].content).
        type: str
      file:
        description:
          - A file of the role's C(files/) (or a path on the controller), written as it is (as the C(src) of
            M(ansible.builtin.copy)).
        type: str
      vars:
        description: Variables for this template only (such as C(item) for a template written once per unit).
        type: dict
      dest:
        description: The file on the node (absolute; its folder must exist).
        type: path
        required: true
      content:
        description:
          - The file's text as it is, in place of a template (the action plugin hands the module every file's text
            this way, base64).
        type: str
      mode:
        description: The file's mode (octal string).
        type: str
        required: true
      owner:
        description: The file's owner.
        type: str
        default: root
      group:
        description: The file's group.
        type: str
        default: root
      validate:
        description: A command that must pass on the candidate before it is written, C(%s) its path.
        type: str
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: Reports the files it would write and writes none; runs no O(files[].validate).
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
    details: The text before and after of each file it writes.
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Write the fabric firewall and its unit
  gb10.serving.node_templates:
    files:
      - src: gb10-fabric.nft.j2
        dest: /etc/gb10/fabric.nft
        mode: "0600"
        validate: /usr/sbin/nft -c -f %s
      - src: gb10-fabric-firewall.service.j2
        dest: /etc/systemd/system/gb10-fabric-firewall.service
        mode: "0644"
        validate: systemd-analyze verify %s:gb10-fabric-firewall.service
  notify: Load the fabric firewall
"""

RETURN = r"""
written:
  description:
    - The folders made or changed (ending in C(/)), then the files written, in the order given (in check mode,
      those that would be).
  type: list
  elements: str
  returned: always
files:
  description: How many files were compared.
  type: int
  returned: always
"""

import base64
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils._node_write import (
    DIRECTORY_OPTIONS,
    FILE_OPTIONS,
    attributes,
    put,
    validate_problems,
    write_validated,
)


def _directories(module, directories):
    """Make each folder missing (its missing parents with it, as ansible.builtin.file does) and set its owner, group
    and mode; the paths made or changed."""
    changed = []
    for entry in directories:
        path = os.path.normpath(entry["path"])
        if os.path.isdir(path):
            if attributes(module, path, entry["mode"], entry["owner"], entry["group"]):
                changed.append(path + "/")
            continue
        changed.append(path + "/")
        if not module.check_mode:
            os.makedirs(path)
            attributes(module, path, entry["mode"], entry["owner"], entry["group"])
    return changed


def main():
    module = AnsibleModule(
        argument_spec={
            "directories": {"type": "list", "elements": "dict", "default": [], "options": DIRECTORY_OPTIONS},
            "files": {"type": "list", "elements": "dict", "default": [], "options": FILE_OPTIONS},
        },
        supports_check_mode=True,
    )
    files = module.params["files"]
    problems = validate_problems(files)
    problems += [
        f"{entry['dest']}: no content (the action plugin renders it)" for entry in files if entry["content"] is None
    ]
    if problems:
        module.fail_json(msg="node_templates: " + "; ".join(problems))
    relative = [entry["path"] for entry in module.params["directories"] if not os.path.isabs(entry["path"])]
    if relative:
        module.fail_json(msg=f"node_templates: directories {relative} are not absolute paths")
    written, diffs = _directories(module, module.params["directories"]), []
    for entry in files:
        path, data = entry["dest"], base64.b64decode(entry["content"])

        def write(module, path, data, validate=entry["validate"]):
            return write_validated(module, path, data, validate)

        changed, refused = put(module, path, data, entry["mode"], entry["owner"], entry["group"], diffs, write)
        if refused:
            module.fail_json(msg=f"node_templates: {refused}", written=written, changed=bool(written))
        if changed:
            written.append(path)
    module.exit_json(changed=bool(written), written=written, files=len(files), diff=diffs)


if __name__ == "__main__":
    main()
