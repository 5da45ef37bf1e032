# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters of the rolling upgrade (playbooks/rolling_upgrade.yml); the logic is in module_utils/_rolling_upgrade.

Each filter's documentation is its own sidecar file (plugins/filter/<filter name>.yml): ansible-doc reads a
DOCUMENTATION here for every filter of the file, so this file holds none.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gb10.serving.plugins.module_utils._deferred import module_utils

_rolling_upgrade = module_utils("_rolling_upgrade")


def vllm_in_flight(text):
    try:
        return _rolling_upgrade.in_flight(text)
    except ValueError as err:
        raise AnsibleFilterError(str(err)) from err


def upgrade_smoke_request(model, max_tokens=256, tool=None, tool_choice="auto"):
    try:
        return _rolling_upgrade.smoke_request(model, max_tokens, dict(tool) if tool else None, tool_choice)
    except ValueError as err:
        raise AnsibleFilterError(str(err)) from err


def upgrade_smoke_verdict(response, parser=None, tool=None):
    return _rolling_upgrade.smoke_verdict(response, parser, dict(tool) if tool else None)


def upgrade_warmup_verdict(response):
    return _rolling_upgrade.warmup_verdict(response)


def upgrade_node_drift(container, image, argv, env):
    return _rolling_upgrade.node_drift(container, image, list(argv), dict(env))


def upgrade_merge_proxy_views(views):
    return _rolling_upgrade.merge_proxy_views([list(servers) for servers in views])


def upgrade_failure_message(node, step, error, serving, command, drained=True):
    return _rolling_upgrade.failure_message(node, step, error, list(serving), command, bool(drained))


def upgrade_node_timings(marks):
    return _rolling_upgrade.node_timings({key: float(value) for key, value in dict(marks).items()})


class FilterModule:
    def filters(self):
        return {
            "vllm_in_flight": vllm_in_flight,
            "upgrade_smoke_request": upgrade_smoke_request,
            "upgrade_smoke_verdict": upgrade_smoke_verdict,
            "upgrade_warmup_verdict": upgrade_warmup_verdict,
            "upgrade_node_drift": upgrade_node_drift,
            "upgrade_merge_proxy_views": upgrade_merge_proxy_views,
            "upgrade_failure_message": upgrade_failure_message,
            "upgrade_node_timings": upgrade_node_timings,
        }
