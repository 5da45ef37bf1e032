#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Module gb10.serving.node_files: install files of the collection on a node in one module run."""

from __future__ import annotations

DOCUMENTATION = r"""
module: node_files
short_description: Install a program and the collection files it imports on a node in one module run
description:
  - Copies files and folders from the controller to one folder of the node, in one module run for all of them
    (M(ansible.builtin.copy) makes two a file even when nothing changes). Each file is written only where its bytes,
    mode, owner or group differ, through a temporary file and a rename in its folder.
  - A source file lands as O(dest)/<its name>; a source folder as O(dest)/<its name>/<its files>, with its
    subfolders, leaving out C(__pycache__), C(*.pyc) and hidden names. Missing folders are made with
    O(directory_mode). Files on the node that no source names are left alone.
  - The action plugin of the same name reads O(src) on the controller (relative paths in the role's C(files/), as
    M(ansible.builtin.copy) finds them) and hands the module O(files).
options:
  src:
    description: Files and folders on the controller. Read by the action plugin; the module never gets them.
    type: list
    elements: path
  dest:
    description: The folder of the node the sources land in (absolute).
    type: path
    required: true
  files:
    description: What the action plugin read (C(path) under O(dest), C(content) base64); not given by hand.
    type: list
    elements: dict
    default: []
  mode:
    description: Every file's mode (octal string).
    type: str
    required: true
  directory_mode:
    description:
      - The mode of a folder the module makes (octal string), and of every folder of the installed tree below
        O(dest) (a source folder's), which also takes O(owner) and O(group); O(dest) and the folders above it, when
        they exist, are left as they are.
    type: str
    default: "0755"
  owner:
    description: Every file's owner.
    type: str
    default: root
  group:
    description: Every file's group.
    type: str
    default: root
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: Reports the files it would write, and writes none.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
    details: The text before and after of each file it writes (binary files are named only).
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Install the transfer script and the _weights package it imports
  gb10.serving.node_files:
    src:
      - weights_transfer.py
      - "{{ role_path }}/../../plugins/module_utils/_weights"
    dest: /var/lib/gb10/weights
    mode: "0700"
    directory_mode: "0700"
"""

RETURN = r"""
written:
  description: The node paths written (in check mode, those that would be).
  type: list
  elements: str
  returned: always
files:
  description: How many files the sources hold.
  type: int
  returned: always
"""

import base64
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils._node_files import missing_parents, tree_folders
from ansible_collections.gb10.serving.plugins.module_utils._node_write import attributes, put, write_beside


def _write(module, path, data):
    write_beside(module, path, data, ".gb10-node-files-")


def main():
    module = AnsibleModule(
        argument_spec={
            "src": {"type": "list", "elements": "path"},
            "dest": {"type": "path", "required": True},
            "files": {"type": "list", "elements": "dict", "default": []},
            "mode": {"type": "str", "required": True},
            "directory_mode": {"type": "str", "default": "0755"},
            "owner": {"type": "str", "default": "root"},
            "group": {"type": "str", "default": "root"},
        },
        supports_check_mode=True,
    )
    params = module.params
    if params["src"]:
        module.fail_json(msg="node_files: src is read on the controller by the action plugin gb10.serving.node_files")
    dest = os.path.abspath(params["dest"])
    wanted = []
    for entry in params["files"]:
        path = os.path.normpath(os.path.join(dest, entry["path"]))
        if not path.startswith(dest + os.sep):
            module.fail_json(msg=f"node_files: {entry['path']!r} is not below {dest}")
        wanted.append((path, base64.b64decode(entry["content"])))
    owner, group = params["owner"], params["group"]
    written, diffs = [], []
    missing = missing_parents([path for path, _data in wanted], os.path.isdir)
    for folder in missing:
        written.append(folder + "/")
        if not module.check_mode:
            os.mkdir(folder)
            attributes(module, folder, params["directory_mode"], owner, group)
    for folder in tree_folders([path for path, _data in wanted], dest):
        if folder not in missing and attributes(module, folder, params["directory_mode"], owner, group):
            written.append(folder + "/")
    for path, data in wanted:
        changed, _refused = put(module, path, data, params["mode"], owner, group, diffs, _write)
        if changed:
            written.append(path)
    module.exit_json(changed=bool(written), written=written, files=len(wanted), diff=diffs)


if __name__ == "__main__":
    main()
