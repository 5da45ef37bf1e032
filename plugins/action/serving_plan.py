# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action plugin gb10.serving.serving_plan: build the serving plan on the controller (plans offline)."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.gb10.serving.plugins.module_utils._node_inputs import node_input
from ansible_collections.gb10.serving.plugins.module_utils._plan import format_plan, format_violations, plan

_ARGUMENT_SPEC = {
    "profile": {"type": "str"},
    "profiles": {"type": "dict"},
    "hosts": {"type": "list", "elements": "str"},
    "ray_head": {"type": "str"},
    "ray_workers": {"type": "list", "elements": "str"},
    "fabric_cidr": {"type": "str"},
    "use_measured": {"type": "bool", "default": False},
}


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

        hosts = args["hosts"] if args["hosts"] is not None else list(groups.get("gb10_nodes") or [])
        heads = list(groups.get("gb10_ray_head") or [])
        ray_head = args["ray_head"] if args["ray_head"] is not None else (heads[0] if heads else None)
        ray_workers = args["ray_workers"]
        if ray_workers is None:
            ray_workers = list(groups.get("gb10_ray_workers") or [])

        nodes = {}
        for host in hosts:
            hvars = hostvars.get(host) or {}
            wanted = {
                key: hvars.get(key)
                for key in (
                    "gb10_fabric_interface",
                    "gb10_fabric_address",
                    "gb10_stated_facts",
                    "gb10_node_figures_prefer",
                    "memory_guard_other_work_reserve_gib",
                    "model_weights_snapshot_path",
                    "gb10_hf_cache_dir",
                    "ansible_facts",
                )
            }
            try:
                nodes[host] = node_input(self._templar.template(wanted), use_measured=args["use_measured"])
            except ValueError as problem:
                return {**result, "failed": True, "msg": f"{host}: {problem}"}

        fabric_cidr = args["fabric_cidr"]
        if fabric_cidr is None and hosts:
            fabric_cidr = self._templar.template((hostvars.get(hosts[0]) or {}).get("gb10_fabric_cidr"))
        profiles = args["profiles"]
        if profiles is None:
            profiles = self._templar.template(task_vars.get("serving_profiles")) or {}

        planned = plan(
            args["profile"],
            profiles,
            nodes,
            fabric_cidr=fabric_cidr,
            ray_head=ray_head,
            ray_workers=ray_workers,
        )
        result["changed"] = False
        result["plan"] = planned
        result["violations"] = planned["violations"]
        result["plan_text"] = format_plan(planned)
        if planned["violations"]:
            result["failed"] = True
            result["msg"] = format_violations(planned["violations"], "the serving plan")
        else:
            result["msg"] = (
                f"serving profile {planned['profile']}: {planned['topology']} on {', '.join(planned['nodes'])}, "
                "no violations"
            )
        return result
