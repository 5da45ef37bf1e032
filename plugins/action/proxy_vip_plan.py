# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action plugin gb10.serving.proxy_vip_plan: plan the floating proxy address on the controller."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.gb10.serving.plugins.module_utils._node_inputs import node_input
from ansible_collections.gb10.serving.plugins.module_utils._plan import format_violations
from ansible_collections.gb10.serving.plugins.module_utils._plan.proxy_vip import plan

_ARGUMENT_SPEC = {
    "address": {"type": "str", "required": True},
    "prefix": {"type": "int", "default": 24},
    "hosts": {"type": "list", "elements": "str"},
    "virtual_router_id": {"type": "int", "default": 51},
    "advert_int": {"type": "float", "default": 1.0},
    "bind_address": {"type": "str", "default": "*"},
    "use_measured": {"type": "bool", "default": True},
}
_HOST_KEYS = (
    "gb10_fabric_interface",
    "gb10_fabric_address",
    "gb10_stated_facts",
    "gb10_node_figures_prefer",
    "ansible_facts",
    "proxy_vip_interface",
    "proxy_vip_priority",
)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=_ARGUMENT_SPEC)
        groups = task_vars.get("groups") or {}
        hostvars = task_vars.get("hostvars") or {}
        hosts = args["hosts"] if args["hosts"] is not None else list(groups.get("gb10_proxy") or [])

        nodes = {}
        for host in hosts:
            hvars = self._templar.template({key: (hostvars.get(host) or {}).get(key) for key in _HOST_KEYS})
            try:
                figures = node_input(hvars, use_measured=args["use_measured"])
            except ValueError as problem:
                return {**result, "failed": True, "msg": f"{host}: {problem}"}
            nodes[host] = {
                "fabric_address": figures["fabric_address"],
                "fabric_interface": figures["fabric_interface"],
                "vip_interface": hvars.get("proxy_vip_interface") or figures["fabric_interface"],
                "interfaces": figures["facts"].get("interfaces") or {},
                "priority": hvars.get("proxy_vip_priority"),
            }
        others = {
            host: self._templar.template((hostvars.get(host) or {}).get("gb10_fabric_address"))
            for host in groups.get("all") or []
        }
        planned = plan(
            args["address"],
            args["prefix"],
            hosts,
            nodes,
            virtual_router_id=args["virtual_router_id"],
            advert_int=args["advert_int"],
            bind_address=args["bind_address"],
            other_addresses={host: address for host, address in others.items() if address},
        )
        result["changed"] = False
        result["plan"] = planned
        result["violations"] = planned["violations"]
        if planned["violations"]:
            result["failed"] = True
            result["msg"] = format_violations(planned["violations"], "the floating proxy address")
        else:
            result["msg"] = (
                f"floating address {planned['address']}/{planned['prefix']} on {', '.join(hosts)} "
                f"(VRID {planned['virtual_router_id']}), no violations"
            )
        return result
