# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Input-validation rules: values written bare into unit lines, the nodes' addresses and interfaces, what vLLM
binds, and secrets put where the plan prints them (``inputs.py`` holds the patterns and why)."""

from __future__ import annotations

import ipaddress
import re

from .checks import each_node, unmatched
from .inputs import (
    ENV_NAME_RE,
    PROFILE_NAME_RE,
    SECRET_ENV,
    SECRETS_HOME,
    SERVED_NAME_RE,
    ifname_problem,
    secret_env_name,
    secret_flag,
)
from .registry import rule
from .violation import ALL_NODES, violation


@rule("profile_name_unsafe", pitfall="input validation", stage="profile")
def profile_name_unsafe(ctx):
    name = ctx.profile_name
    if not name:
        return ()
    return unmatched(
        "profile_name_unsafe",
        PROFILE_NAME_RE,
        name,
        f"serving profile name {name!r} is written into the systemd units and haproxy.cfg as it is: use "
        "letters, digits, '.', '_' and '-' only (at most 64, starting with a letter or digit)",
    )


@rule("served_model_name_unsafe", pitfall="input validation")
def served_model_name_unsafe(ctx):
    name = ctx.served_name
    if not name:
        return ()
    return unmatched(
        "served_model_name_unsafe",
        SERVED_NAME_RE,
        name,
        f"model.served_model_name {name!r} is written into the serving unit's Description= line as it is, "
        "where a line break would start new unit directives: use letters, digits and . _ : / @ + - only "
        "(at most 128, starting with a letter or digit), e.g. "
        + repr(re.sub(r"[^A-Za-z0-9._:/@+-]+", "-", str(name)).strip("-")[:128] or "my-model"),
    )


@rule("env_unsafe", pitfall="input validation")
def env_unsafe(ctx):
    for name, value in sorted((ctx.profile.get("env") or {}).items(), key=lambda kv: str(kv[0])):
        if not ENV_NAME_RE.match(str(name)):
            yield violation(
                ALL_NODES,
                "env_unsafe",
                name,
                f"env name {name!r} is not an environment variable name: letters, digits and '_', not starting "
                "with a digit",
            )
        elif any(c in str(value) for c in "\r\n\0"):
            yield violation(
                ALL_NODES,
                "env_unsafe",
                name,
                f"env.{name} holds a line break or NUL: the engine env file takes one NAME=value per line. "
                "Put the value on one line",
            )


@rule("env_secret", pitfall="input validation")
def env_secret(ctx):
    for name in sorted(ctx.profile.get("env") or {}, key=str):
        if secret_env_name(name):
            yield violation(
                ALL_NODES,
                "env_secret",
                name,
                f"env.{name} looks like a secret, and the profile's env is printed in the plan and written to the "
                f"world-readable engine env file: remove it from the profile's env and {SECRETS_HOME}",
            )


@rule("vllm_option_secret", pitfall="input validation")
def vllm_option_secret(ctx):
    for key in sorted(ctx.options, key=str):
        name = str(key).lstrip("-")
        if secret_flag(name) and ctx.options[key] is not None:
            env = SECRET_ENV.get(name.lower())
            yield violation(
                ALL_NODES,
                "vllm_option_secret",
                f"--{name}",
                f"vllm_options.{name} puts a secret on the command line, which ps, docker inspect, the journal "
                f"and the plan output show: remove it and {SECRETS_HOME}"
                + (f", as serving_secrets.{env}" if env else ""),
            )


def _address_problem(address):
    try:
        ipaddress.ip_address(str(address).strip())
    except ValueError:
        return True
    return False


@rule("replica_address_missing", pitfall="input validation")
def replica_address_missing(ctx):
    for host in ctx.hosts:
        figures = ctx.per_node[host]
        if figures["role"] == "replica" and not figures["address"]:
            yield violation(
                host,
                "replica_address_missing",
                None,
                f"{host} has no gb10_fabric_address: vLLM would listen on every interface of {host}, and the "
                f"proxy has no address to reach it on. Set gb10_fabric_address for {host} (the proxy's "
                "backends are reached there); bind_all_interfaces: true in the profile makes vLLM listen on "
                "all interfaces on purpose",
            )


@rule("bind_all_interfaces", pitfall="input validation")
def bind_all_interfaces(ctx):
    value = ctx.profile.get("bind_all_interfaces")
    if value is not None and not isinstance(value, bool):
        yield violation(
            ALL_NODES,
            "bind_all_interfaces",
            value,
            f"bind_all_interfaces is {value!r}: write true (vLLM listens on 0.0.0.0, every interface) or false "
            "(the node's gb10_fabric_address, the default)",
        )


@rule("node_address_invalid", pitfall="input validation")
def node_address_invalid(ctx):
    if ctx.tensor_parallel:
        return  # tp_node_ip refuses a rank's address that is not an IP address
    return each_node(
        ctx,
        "node_address_invalid",
        lambda figures: figures["address"] and _address_problem(figures["address"]),
        lambda figures: figures["address"],
        "gb10_fabric_address of {host} is {value!r}, not an IP address: vLLM binds it and the proxy "
        "and keepalived configuration are written with it. Set it to the node's address",
    )


@rule("node_interface_invalid", pitfall="input validation")
def node_interface_invalid(ctx):
    for host in ctx.hosts:
        name = ctx.per_node[host]["ifname"]
        problem = ifname_problem(name) if name is not None else ""
        if problem:
            yield violation(
                host,
                "node_interface_invalid",
                name,
                f"gb10_fabric_interface of {host} is {name!r}, which {problem}: set it to the name "
                "`ip -br link` shows on the node",
            )


@rule("fabric_cidr_invalid", pitfall="input validation")
def fabric_cidr_invalid(ctx):
    if ctx.tensor_parallel or not ctx.fabric_cidr:
        return  # tensor-parallel: tp_fabric_cidr
    try:
        ipaddress.ip_network(str(ctx.fabric_cidr), strict=False)
    except ValueError:
        yield violation(
            ALL_NODES,
            "fabric_cidr_invalid",
            ctx.fabric_cidr,
            f"gb10_fabric_cidr {ctx.fabric_cidr!r} is not a subnet: set it to the fabric network "
            "(e.g. 192.168.200.0/24) or leave it unset",
        )
