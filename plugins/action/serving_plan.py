# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action plugin gb10.serving.serving_plan: build the serving plan on the controller (plans offline)."""

from __future__ import annotations

import os
from pathlib import Path

from ansible.module_utils.common.yaml import yaml_load
from ansible.plugins.action import ActionBase

from ansible_collections.gb10.serving.plugins.module_utils._node_inputs import node_input
from ansible_collections.gb10.serving.plugins.module_utils._plan import format_plan, format_violations, plan
from ansible_collections.gb10.serving.plugins.module_utils._plan.rules_api import affinity_settings, key_shape

_ARGUMENT_SPEC = {
    "profile": {"type": "str"},
    "profiles": {"type": "dict"},
    "hosts": {"type": "list", "elements": "str"},
    "ray_head": {"type": "str"},
    "ray_workers": {"type": "list", "elements": "str"},
    "fabric_cidr": {"type": "str"},
    "use_measured": {"type": "bool", "default": False},
    "image_catalog_dir": {"type": "path"},
}


# The roles' defaults, which apply where the inventory sets nothing: read from the role, never retyped here.
_ROLES = Path(__file__).resolve().parents[2] / "roles"
# Each listener of the collection (exposure.py) and the role variable that sets its port.
_EXPOSED_PORTS = {
    "proxy_client": ("gb10", "gb10_proxy_port"),
    "warm_agent": ("gb10", "gb10_warm_agent_port"),
    "proxy_metrics": ("gb10", "gb10_proxy_metrics_port"),
    "prometheus": ("monitoring", "monitoring_prometheus_port"),
    "node_exporter": ("monitoring", "monitoring_node_exporter_port"),
    "weights_fanout": ("model_weights", "model_weights_fanout_port"),
    "flashinfer_share": ("flashinfer_jit", "flashinfer_jit_share_port"),
}


def role_defaults(role):
    """roles/<role>/defaults/main.yml."""
    return yaml_load((_ROLES / role / "defaults" / "main.yml").read_text(encoding="utf-8")) or {}


def affinity_defaults():
    """The proxy_affinity* variables of roles/proxy/defaults/main.yml."""
    return {key: value for key, value in role_defaults("proxy").items() if key.startswith("proxy_affinity")}


def _affinity(given):
    """The session affinity settings (issue 20, item 3) as the proxy role will use them."""
    return affinity_settings(given, affinity_defaults())


def _true(value):
    return value is True or str(value).lower() in ("true", "yes", "1", "on")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True

    def _api(self, groups, hostvars):
        """The first proxy's public frontend as the proxy role will render it (its defaults where the inventory sets
        nothing) and what its clients need to reach it (the host they use, the CA they verify with; the plan derives
        the URL), and each proxy node's frontend (``frontends``, judged by rules_api.py); only whether gb10_api_key
        is set and its shape leave here, never the key. None without a gb10_proxy group."""
        proxies = list(groups.get("gb10_proxy") or [])
        if not proxies:
            return None
        hvars = hostvars.get(proxies[0]) or {}
        wanted = {
            key: hvars.get(key)
            for key in (
                "proxy_tls_cert",
                "proxy_tls_cert_src",
                "proxy_tls_ca",
                "proxy_client_host",
                "proxy_vip_address",
                "gb10_fabric_address",
                "proxy_affinity",
                "proxy_affinity_header",
                "proxy_affinity_balance_factor",
            )
        }
        given = self._templar.template(wanted)
        frontends = {proxy: self._frontend(hostvars.get(proxy) or {}) for proxy in proxies}
        first = frontends[proxies[0]]
        return {
            "key_set": first["key_set"],
            "anonymous": first["anonymous"],
            "bind": first["bind"],
            "port": first["port"],
            "tls": bool(given["proxy_tls_cert"] or given["proxy_tls_cert_src"]),
            "ca": given["proxy_tls_ca"] or "",
            "client_host": given["proxy_client_host"] or "",
            "vip_address": given["proxy_vip_address"] or "",
            "fabric_address": given["gb10_fabric_address"] or "",
            "affinity": _affinity(given),
            "frontends": frontends,
        }

    def _frontend(self, hvars):
        """One proxy node's public frontend as roles/proxy will render it, for rules_api.py to judge (api_closed,
        api_key_word): whether its gb10_api_key is set and the key's shape (key_shape: length, characters HAProxy's
        key file could not hold), never the key; proxy_anonymous; its bind address and port (roles/gb10's defaults
        where the inventory sets none)."""
        wanted = {
            key: hvars.get(key)
            for key in ("gb10_api_key", "proxy_anonymous", "gb10_proxy_bind_address", "gb10_proxy_port")
        }
        given = self._templar.template(wanted)
        anonymous = given["proxy_anonymous"]
        key = given["gb10_api_key"]
        return {
            "key_set": bool(key),
            "key_shape": key_shape(key),
            "anonymous": anonymous is True or str(anonymous).lower() in ("true", "yes", "1"),
            "bind": given["gb10_proxy_bind_address"] or role_defaults("gb10")["gb10_proxy_bind_address"],
            "port": given["gb10_proxy_port"] or role_defaults("gb10")["gb10_proxy_port"],
        }

    def _site(self, hosts, groups, hostvars):
        """Who may reach what (exposure.py): the proxy and monitoring hosts, every host's fabric address, each
        node's ports of the collection's listeners (the role's default where the inventory sets none) and the site's
        openings (gb10_fence_open of the first node)."""
        roles = {role for role, _variable in _EXPOSED_PORTS.values()} | {"monitoring"}
        defaults = {role: role_defaults(role) for role in roles}

        def value(host, role, variable):
            given = self._templar.template((hostvars.get(host) or {}).get(variable))
            return defaults[role].get(variable) if given is None else given

        first = hosts[0] if hosts else None
        enabled = value(first, "monitoring", "monitoring_enabled") if first else False
        everyone = sorted(set(hosts) | set(groups.get("gb10_proxy") or []) | set(groups.get("gb10_monitoring") or []))
        ports = {}
        for host in hosts:
            ports[host] = {}
            for service, (role, variable) in _EXPOSED_PORTS.items():
                try:
                    ports[host][service] = int(value(host, role, variable) or 0)
                except (TypeError, ValueError):
                    ports[host][service] = 0
        opened = self._templar.template((hostvars.get(first) or {}).get("gb10_fence_open")) if first else None
        return {
            "proxies": list(groups.get("gb10_proxy") or []),
            "monitoring": list(groups.get("gb10_monitoring") or []) if _true(enabled) else [],
            "addresses": {
                host: self._templar.template((hostvars.get(host) or {}).get("gb10_fabric_address")) for host in everyone
            },
            "ports": ports,
            "open": opened if opened is not None else role_defaults("gb10").get("gb10_fence_open", []),
        }

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

        image_catalog_dir = args["image_catalog_dir"]
        if image_catalog_dir is None:
            # the first node's gb10_vllm_catalog_dir, else roles/gb10's default (read from the role, never retyped)
            given = (
                self._templar.template((hostvars.get(hosts[0]) or {}).get("gb10_vllm_catalog_dir")) if hosts else None
            )
            image_catalog_dir = given or role_defaults("gb10").get("gb10_vllm_catalog_dir")
        planned = plan(
            args["profile"],
            profiles,
            nodes,
            fabric_cidr=fabric_cidr,
            ray_head=ray_head,
            ray_workers=ray_workers,
            api=self._api(groups, hostvars),
            site=self._site(hosts, groups, hostvars),
            image_catalog_dir=os.path.expanduser(str(image_catalog_dir)) if image_catalog_dir else None,
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
