# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Ray's fence in tensor-parallel (``ray.py``): the ``ray:`` settings are sound, and Ray is never left open."""

from __future__ import annotations

from . import ray as _ray
from .context import uses_ray
from .registry import rule
from .violation import ALL_NODES, violation

_OPEN = "issue 18: Ray hands the LAN a shell"
# Ray reads these from the environment; the plan sets the mode from ray.auth and the serving role the token.
RAY_AUTH_ENV = ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")


@rule("ray_settings", pitfall=_OPEN)
def ray_settings(ctx):
    if not uses_ray(ctx):
        return
    for field, value, why in ctx.ray_problems:
        yield violation(ALL_NODES, "ray_settings", value, f"{field} {value!r} {why}")
    for clash in _ray.port_clashes(ctx.ray_ports, ctx.port):
        yield violation(
            ALL_NODES,
            "ray_settings",
            clash,
            f"Ray's ports cannot all be bound on one node: {clash}. Set distinct ray.ports (workers take "
            "min_worker..max_worker, one port per worker process)",
        )
    for name in RAY_AUTH_ENV:
        if name in ctx.profile_env:
            yield violation(
                ALL_NODES,
                "ray_settings",
                name,
                f"env {name} is written by the plan and the serving role (ray.auth: token|disabled; the token is "
                "serving_ray_auth_token or generated per site): remove it from the profile's env",
            )


@rule("ray_open", pitfall=_OPEN)
def ray_open(ctx):
    if uses_ray(ctx) and ctx.ray_auth != "token" and not ctx.ray_firewall:
        yield violation(
            ALL_NODES,
            "ray_open",
            "auth=disabled firewall=false",
            f"ray.auth is disabled and ray.firewall is false: Ray's ports ({ctx.ray_ports['gcs']} and "
            f"{len(_ray.listening_ports(ctx.ray_ports, 'ray_head')) - 1} more, workers "
            f"{ctx.ray_ports['min_worker']}-{ctx.ray_ports['max_worker']}) would run code for anyone who reaches "
            f"the nodes {', '.join(ctx.hosts)}. Set ray.auth: token (the default) or ray.firewall: true (the "
            "default; roles/fabric_firewall lets them in from the group's fabric addresses only), best both",
        )
