# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Ray's fence in tensor-parallel: token authentication, every port fixed, and the peers the firewall lets in.

Ray's GCS, raylet, object manager, agents and workers run code for whoever reaches them. The pinned Ray (2.60.0;
token authentication since 2.52.0) takes ``RAY_AUTH_MODE=token`` with the shared secret in ``RAY_AUTH_TOKEN``,
read from the environment of every ``ray start`` and of the vLLM driver (ray/_private/authentication/
authentication_token_setup.py). The serving role writes both to a root-only env file; the plan holds no secret.
Every port ``ray start`` would otherwise pick at random is fixed here so that the firewall
(roles/fabric_firewall) can let exactly these in from the group's fabric addresses and refuse them from elsewhere.
"""

from __future__ import annotations

AUTH_MODES = ("token", "disabled")
# Single ports, by ``ray start`` option (Ray 2.60.0 ``ray start --help``); the head also listens on gcs and
# client_server. Defaults: Ray's own 6379 / 10001 / 52365, the rest next to the GCS port.
PORT_OPTIONS = {
    "gcs": "--port",
    "node_manager": "--node-manager-port",
    "object_manager": "--object-manager-port",
    "dashboard_agent_grpc": "--dashboard-agent-grpc-port",
    "dashboard_agent_listen": "--dashboard-agent-listen-port",
    "metrics_export": "--metrics-export-port",
    "runtime_env_agent": "--runtime-env-agent-port",
    "client_server": "--ray-client-server-port",
}
HEAD_ONLY = ("gcs", "client_server")
RAY_DASHBOARD_PORT = 8265  # ray_constants.DEFAULT_DASHBOARD_PORT of Ray 2.60.0
DEFAULT_PORTS = {
    "gcs": 6379,
    "node_manager": 6380,
    "object_manager": 6381,
    "dashboard_agent_grpc": 6382,
    "metrics_export": 6383,
    "runtime_env_agent": 6384,
    "client_server": 10001,
    "dashboard_agent_listen": 52365,
    # one port per Ray worker or driver process (a vLLM rank is one; Ray prestarts up to one per CPU): ample
    "min_worker": 10002,
    "max_worker": 10999,
}


def settings(profile):
    """``(auth, firewall, ports, problems)`` from the profile's ``ray:`` mapping, defaults filled in.

    problems: ``[(field, value, why)]`` for ray_settings; a bad field keeps its default so the rest still plans.
    """
    given = profile.get("ray")
    problems = []
    if given is None:
        given = {}
    if not isinstance(given, dict):
        problems.append(("ray", given, "must be a mapping (auth, firewall, ports)"))
        given = {}
    for key in sorted(set(given) - {"auth", "firewall", "ports"}, key=str):
        problems.append((f"ray.{key}", given[key], "is not a setting of ray: (auth, firewall, ports)"))
    auth = given.get("auth", "token")
    if auth not in AUTH_MODES:
        problems.append(("ray.auth", auth, "must be token or disabled"))
        auth = "token"
    firewall = given.get("firewall", True)
    if not isinstance(firewall, bool):
        problems.append(("ray.firewall", firewall, "must be true or false"))
        firewall = True
    ports = dict(DEFAULT_PORTS)
    for key, value in sorted((given.get("ports") or {}).items(), key=lambda kv: str(kv[0])):
        if key not in DEFAULT_PORTS:
            problems.append((f"ray.ports.{key}", value, "is not a Ray port: " + ", ".join(sorted(DEFAULT_PORTS))))
        elif isinstance(value, bool) or not isinstance(value, int) or not 1024 <= value <= 65535:
            problems.append((f"ray.ports.{key}", value, "must be a port number from 1024 to 65535"))
        else:
            ports[key] = value
    return auth, firewall, ports, problems


def port_clashes(ports, serving_port):
    """Why these ports cannot all be bound on one node (two uses of one port, a bad worker range); [] when fine."""
    clashes = []
    low, high = ports["min_worker"], ports["max_worker"]
    if low > high:
        clashes.append(f"min_worker {low} is above max_worker {high}")
    owners = {}
    for key in sorted(PORT_OPTIONS):
        owners.setdefault(ports[key], []).append(key)
    if isinstance(serving_port, int):
        owners.setdefault(serving_port, []).append("vLLM's port")
    # ray start reserves its --dashboard-port (8265 unless given) even with the dashboard off, and refuses a component
    # on a reserved port (ray/_private/parameter.py update_pre_selected_port).
    owners.setdefault(RAY_DASHBOARD_PORT, []).append("Ray's reserved dashboard port")
    for port, keys in sorted(owners.items()):
        if len(keys) > 1:
            clashes.append(f"{' and '.join(keys)} are all {port}")
        if low <= port <= high:
            clashes.append(f"{' and '.join(keys)} ({port}) lies in the worker range {low}-{high}")
    return clashes


def listening_ports(ports, role):
    """The single TCP ports Ray listens on for a node of ``role`` (sorted), without the worker range."""
    keys = [k for k in PORT_OPTIONS if role == "ray_head" or k not in HEAD_ONLY]
    return sorted(ports[k] for k in keys)


def port_argv(ports, role):
    """The ``ray start`` options that fix every port of a node of ``role``."""
    words = [
        f"{option}={ports[key]}" for key, option in PORT_OPTIONS.items() if role == "ray_head" or key not in HEAD_ONLY
    ]
    return [*words, f"--min-worker-port={ports['min_worker']}", f"--max-worker-port={ports['max_worker']}"]
