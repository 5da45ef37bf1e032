# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters of the proxy role: proxy_affinity_problems (the plan's own affinity rule, for the role's preflight).

Each filter's documentation is its own sidecar file (plugins/filter/<filter name>.yml): ansible-doc reads a
DOCUMENTATION here for every filter of the file, so this file holds none.
"""

from __future__ import annotations

from ansible_collections.gb10.serving.plugins.module_utils._deferred import module_utils

_rules_api = module_utils("_plan.rules_api")


def proxy_affinity_problems(variables):
    settings = _rules_api.affinity_settings(dict(variables or {}), {})
    return [message for _variable, _value, message in _rules_api.affinity_problems(settings)]


class FilterModule:
    def filters(self):
        return {"proxy_affinity_problems": proxy_affinity_problems}
