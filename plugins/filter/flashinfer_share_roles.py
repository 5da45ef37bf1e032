# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filter gb10.serving.flashinfer_share_roles: which node builds the FlashInfer module, which receive it."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.sharing import share_roles as _share_roles

DOCUMENTATION = r"""
name: flashinfer_share_roles
short_description: Built once per cluster, which node builds the prebuilt FlashInfer module and which receive it
version_added: 0.1.1
author: gb10.serving maintainers
description:
  - Nodes with the same share key (image digest, flashinfer version, arch, the cache's container path and the
    variables that reach build.ninja) take the module from one node. A node due for it receives it from the first
    node of its key that holds it (built earlier in this run, or a valid stamp); with none, the first due node of
    the key builds and the others receive from it. A node whose key differs builds its own.
options:
  _input:
    description: The nodes in inventory order, each with C(name), C(key), C(has) and C(due).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: This node's part
  ansible.builtin.set_fact:
    share: "{{ (nodes | gb10.serving.flashinfer_share_roles)[inventory_hostname] }}"
"""

RETURN = r"""
_value:
  description: By node name, C(action) (present, build or receive), C(source) (the node to receive from) and C(key).
  type: dict
"""


def flashinfer_share_roles(nodes):
    try:
        return _share_roles([dict(node) for node in nodes or []])
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"flashinfer_share_roles: {exc}") from exc


class FilterModule:
    def filters(self):
        return {"flashinfer_share_roles": flashinfer_share_roles}
