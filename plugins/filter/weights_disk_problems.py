# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filter gb10.serving.weights_disk_problems: refuse a weights fetch that would not fit on the node's disk."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gb10.serving.plugins.module_utils._disk import weights_disk_problems as _problems

DOCUMENTATION = r"""
name: weights_disk_problems
short_description: Reasons the missing part of a model snapshot would not fit on the disk that holds the cache
version_added: 0.1.1
author: gb10.serving maintainers
description:
  - Finds the mount that holds O(cache_dir) among the node's C(ansible_facts.mounts) (the longest mount point that
    is the folder or a parent of it) and compares its free space with the bytes still missing plus a reserve.
  - Returns an empty list when it fits or nothing is missing.
positional: node, cache_dir, total_bytes, present_bytes, reserve_gib
options:
  _input:
    description: The node's C(ansible_facts.mounts).
    type: list
    elements: dict
    required: true
  node:
    description: The node's name, for the message.
    type: str
    required: true
  cache_dir:
    description: The Hugging Face cache folder on the node (it need not exist yet).
    type: str
    required: true
  total_bytes:
    description: Bytes of the whole snapshot (the hub's file sizes).
    type: int
    required: true
  present_bytes:
    description: Bytes of the snapshot the node already holds.
    type: int
    required: true
  reserve_gib:
    description: GiB to keep free beyond the snapshot.
    type: float
    required: true
"""

EXAMPLES = r"""
- name: Keep the disk problems
  ansible.builtin.set_fact:
    __model_weights_disk_problems: >-
      {{ ansible_facts.mounts | gb10.serving.weights_disk_problems(inventory_hostname, '/var/lib/gb10/hf-cache',
         194000000000, 0, 10) }}
"""

RETURN = r"""
_value:
  description: One message naming the node, the mount, the free and needed GiB and the fix; empty when it fits.
  type: list
  elements: str
"""


def weights_disk_problems(mounts, node, cache_dir, total_bytes, present_bytes, reserve_gib):
    try:
        return _problems(node, cache_dir, list(mounts or []), int(total_bytes), int(present_bytes), float(reserve_gib))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"weights_disk_problems: {exc}") from exc


class FilterModule:
    def filters(self):
        return {"weights_disk_problems": weights_disk_problems}
