#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: is a model snapshot on this node complete?"""

from __future__ import annotations

DOCUMENTATION = r"""
module: weights_complete
short_description: Check that a Hugging Face snapshot on this node is complete before serving from it
description:
  - Reads the snapshot folder of a pinned revision in the node's Hugging Face cache and checks that config.json is
    present, that every shard named in model.safetensors.index.json is present with the size the hub reported
    (the manifest the model_weights fetch recorded from the hub's tree listing), and that the model's cache folder
    holds no partial download (C(*.incomplete)).
  - Read-only. With O(fail_incomplete=true) an incomplete snapshot fails the task with a message naming the node and
    the missing or wrong shards.
version_added: 0.1.0
extends_documentation_fragment:
  - gb10.serving.read_only
author:
  - gb10.serving maintainers (!UNKNOWN)
options:
  node:
    description: Name of the node, used in messages.
    type: str
    required: true
  cache_dir:
    description: The node's Hugging Face cache folder (the one mounted at /root/.cache/huggingface).
    type: path
    required: true
  repo_id:
    description: Model repository id, for example C(org/name).
    type: str
    required: true
  revision:
    description: Commit the snapshot is pinned to.
    type: str
    required: true
  manifest:
    description: JSON file of {path {size, blob}} the fetch recorded from the hub.
    type: path
    required: true
  fail_incomplete:
    description: Fail the task when the snapshot is not complete.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Refuse to serve from an incomplete snapshot
  gb10.serving.weights_complete:
    node: "{{ inventory_hostname }}"
    cache_dir: /var/lib/gb10/hf-cache
    repo_id: gb10-sim/tiny-moe
    revision: 5d0c2a8e4b1f7c3a9e6d2b8f0a4c6e1d3b5f7a9c
    manifest: /var/lib/gb10/model-weights/manifests/models--gb10-sim--tiny-moe@5d0c2a8e.json
    fail_incomplete: true
"""

RETURN = r"""
complete:
  description: Whether the snapshot is complete.
  type: bool
  returned: always
snapshot_path:
  description: The snapshot folder checked.
  type: str
  returned: always
missing:
  description: Files the snapshot lacks (config.json, the index, shards).
  type: list
  elements: str
  returned: always
wrong_size:
  description: Files whose size differs from the hub's, with both sizes.
  type: list
  elements: str
  returned: always
partial:
  description: Partial download files found in the model's cache folder.
  type: list
  elements: str
  returned: always
files:
  description: Size of every file the snapshot resolves to, by relative path.
  type: dict
  returned: always
bytes_present:
  description: Bytes of the snapshot's files present.
  type: int
  returned: always
bytes_expected:
  description: Bytes the manifest lists (0 without one).
  type: int
  returned: always
fingerprint:
  description: sha256 of the sorted {path size} listing, equal on nodes with identical snapshots.
  type: str
  returned: always
msg:
  description: One line per problem, naming the node, or a line saying the snapshot is complete.
  type: str
  returned: always
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils import _weights


def observe(cache_dir, repo_id, revision, manifest_path):
    folder = os.path.join(cache_dir, "hub", _weights.repo_folder(repo_id))
    snapshot = os.path.join(folder, "snapshots", revision)
    observed = None
    if os.path.isdir(snapshot):
        observed = {}
        for root, _dirs, names in os.walk(snapshot):
            for name in names:
                path = os.path.join(root, name)
                if os.path.exists(path):  # a dangling link to a missing blob counts as missing
                    observed[os.path.relpath(path, snapshot)] = os.path.getsize(path)
    partial = []
    for root, _dirs, names in os.walk(folder):
        partial.extend(os.path.join(root, n) for n in names if n.endswith(_weights.PARTIAL_SUFFIXES))
    index_path = os.path.join(snapshot, _weights.INDEX_FILE)
    index_text = None
    if os.path.isfile(index_path):
        with open(index_path) as handle:
            index_text = handle.read()
    manifest = None
    if os.path.isfile(manifest_path):
        with open(manifest_path) as handle:
            manifest = json.load(handle)
    return snapshot, observed, index_text, manifest, partial


def main():
    module = AnsibleModule(
        argument_spec={
            "node": {"type": "str", "required": True},
            "cache_dir": {"type": "path", "required": True},
            "repo_id": {"type": "str", "required": True},
            "revision": {"type": "str", "required": True},
            "manifest": {"type": "path", "required": True},
            "fail_incomplete": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    p = module.params
    snapshot, observed, index_text, manifest, partial = observe(
        p["cache_dir"], p["repo_id"], p["revision"], p["manifest"]
    )
    result = _weights.check_snapshot(p["node"], snapshot, observed, index_text, manifest, partial)
    result.pop("problems")
    result.update(
        changed=False,
        snapshot_path=snapshot,
        files=observed or {},
        bytes_present=sum((observed or {}).values()),
        bytes_expected=sum(e["size"] for e in (manifest or {}).values()),
        fingerprint=_weights.fingerprint(observed or {}),
    )
    if p["fail_incomplete"] and not result["complete"]:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
