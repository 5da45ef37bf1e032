# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters that build the files of gb10.serving.node_templates.

Each filter's documentation is its own sidecar file (plugins/filter/<filter name>.yml).
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gb10.serving.plugins.module_utils import _node_write


def node_template_each(items, src, dest, mode="0644", validate=None):
    try:
        return _node_write.template_each(list(items), src, dest, mode, validate)
    except ValueError as err:
        raise AnsibleFilterError(str(err)) from err


class FilterModule:
    def filters(self):
        return {"node_template_each": node_template_each}
