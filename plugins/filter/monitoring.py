# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters of roles/monitoring: monitoring_targets (what Prometheus scrapes, from the serving plan).

Each filter's documentation is its own sidecar file (plugins/filter/<filter name>.yml): ansible-doc reads a
DOCUMENTATION here for every filter of the file, so this file holds none.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gb10.serving.plugins.module_utils import _monitoring


def monitoring_targets(plan, addresses, node_exporter_port, proxy_ports=None):
    try:
        return _monitoring.targets(
            dict(plan or {}), dict(addresses or {}), int(node_exporter_port), dict(proxy_ports or {})
        )
    except (TypeError, ValueError) as err:
        raise AnsibleFilterError(str(err)) from err


class FilterModule:
    def filters(self):
        return {"monitoring_targets": monitoring_targets}
