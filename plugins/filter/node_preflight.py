# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters of the node_preflight role: fabric_problems (the fabric address against the node's own) and
preflight_problems (every role's problems on every node, in one list).

Each filter's documentation is its own sidecar file (plugins/filter/<filter name>.yml): ansible-doc reads a
DOCUMENTATION here for every filter of the file, so this file holds none.
"""

from __future__ import annotations

from ansible_collections.gb10.serving.plugins.module_utils import _preflight


def fabric_problems(facts, node, address, interface=""):
    return _preflight.fabric_problems(dict(facts or {}), node, address, interface)


def preflight_problems(hosts, hostvars, roles, extra_key="__node_preflight_fabric_problems"):
    return _preflight.collect(hostvars, list(hosts), list(roles), extra_key)


class FilterModule:
    def filters(self):
        return {"fabric_problems": fabric_problems, "preflight_problems": preflight_problems}
