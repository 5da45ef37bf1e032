# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The API closed by default (issue 18): the proxy's public frontend wants gb10_api_key unless the inventory opens
it (proxy_anonymous: true), which the plan then prints; and a key HAProxy's key file can hold. The one statement of
these rules: roles/proxy's preflight reads this verdict (the plan's violations), it does not judge again."""

from __future__ import annotations

import re

from .registry import rule
from .violation import ALL_NODES, violation

# A bind address that only this host reaches: 127.0.0.0/8, ::1 (bracketed or not) or localhost, exactly.
LOOPBACK = re.compile(r"^(127\.|::1\Z|localhost\Z)")
# The key is one line of the file HAProxy reads line by line (roles/proxy): one word of printable ASCII.
KEY_CHARACTER = re.compile(r"[\x21-\x7e]")


def is_loopback(bind):
    return bool(LOOPBACK.match(str(bind).strip().removeprefix("[").removesuffix("]")))


def key_shape(key):
    """What the plan may know of gb10_api_key, never the key: its length and how many of its characters HAProxy's
    key file could not hold (whitespace, control characters, anything beyond printable ASCII)."""
    key = "" if key is None else str(key)
    return {"length": len(key), "unmatchable": sum(1 for char in key if not KEY_CHARACTER.fullmatch(char))}


def _frontends(ctx):
    """Each proxy node's frontend ({node: {key_set, key_shape, anonymous, bind, port}}); where the caller gave only
    the first proxy's settings (ctx.api), that one for every node."""
    if ctx.frontends:
        return ctx.frontends
    if ctx.api is None:
        return {}
    return {ALL_NODES: ctx.api}


@rule("api_closed", pitfall="issue 18: an open API on every interface, which nothing could close")
def api_closed(ctx):
    for node, given in _frontends(ctx).items():
        bind, port = given.get("bind") or "*", given.get("port") or 8080
        if given.get("key_set") or given.get("anonymous") or is_loopback(bind):
            continue
        yield violation(
            node,
            "api_closed",
            f"{bind}:{port}",
            f"gb10_api_key is empty and the proxy binds {bind}:{port} (gb10_proxy_bind_address): anyone who reaches "
            "that port would use the model. Set gb10_api_key (vault it: ansible-vault encrypt_string), or "
            "proxy_anonymous: true to serve without a key on purpose",
        )


@rule("api_key_word", pitfall="issue 18: a key HAProxy's key file cannot hold matches no request")
def api_key_word(ctx):
    for node, given in _frontends(ctx).items():
        shape = given.get("key_shape") or {}
        if not shape.get("unmatchable"):
            continue
        yield violation(
            node,
            "api_key_word",
            f"gb10_api_key: {shape.get('length', 0)} characters, {shape['unmatchable']} of them whitespace or "
            "outside printable ASCII",
            f"gb10_api_key holds {shape['unmatchable']} character(s) of whitespace or outside printable ASCII "
            f"(of {shape.get('length', 0)}; the key is not shown): HAProxy reads its key file line by line, one "
            "word a line, so no request could match it. Set a key of printable ASCII without spaces, e.g. "
            "`openssl rand -hex 32`, vaulted (ansible-vault encrypt_string)",
        )


AFFINITY_MODES = ("none", "header", "user")
# One word of haproxy.cfg (req.fhdr(<name>)) and an HTTP field name.
HEADER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]*\Z")
# HAProxy refuses 1..100 ("must be 0 or greater than 100"); 0 would turn the bound off. Above 1000 no replica of
# a small farm is ever bounded.
BALANCE_FACTOR_RANGE = (101, 1000)


def affinity_settings(variables, defaults):
    """The proxy role's proxy_affinity* variables (``defaults`` where one is unset) as the plan and the problems
    below read them: {mode, header, balance_factor}; a factor written as digits is the number Ansible's int
    argument type makes of it."""
    value = {key: default if variables.get(key) is None else variables[key] for key, default in defaults.items()}
    value.update({key: given for key, given in variables.items() if given is not None and key not in defaults})
    factor = value.get("proxy_affinity_balance_factor")
    if isinstance(factor, str) and factor.strip().isdigit():
        factor = int(factor)
    return {
        "mode": value.get("proxy_affinity", "none"),
        "header": value.get("proxy_affinity_header"),
        "balance_factor": factor,
    }


def affinity_problems(affinity):
    """[(variable, value, message)] of the session affinity settings (issue 20, item 3) HAProxy could not use."""
    mode = affinity.get("mode", "none")
    if mode not in AFFINITY_MODES:
        return [
            (
                "proxy_affinity",
                mode,
                f"proxy_affinity is {mode!r}; set none (least connections for every request), header (the session "
                "key in proxy_affinity_header) or user (that header, else the OpenAI user field of the body)",
            )
        ]
    if mode == "none":
        return []
    problems = []
    header = affinity.get("header")
    if not isinstance(header, str) or not HEADER_NAME.match(header):
        problems.append(
            (
                "proxy_affinity_header",
                header,
                f"proxy_affinity_header is {header!r}, not an HTTP header name of letters, digits and '-' (it is one "
                "word of haproxy.cfg); set e.g. X-Session-Id",
            )
        )
    elif header.lower() in ("authorization", "host", "content-length", "transfer-encoding", "connection"):
        problems.append(
            (
                "proxy_affinity_header",
                header,
                f"proxy_affinity_header is {header}: every client sends the same {header} or it names no session, so "
                "one replica would take most of them; name a header the client sets per conversation, e.g. "
                "X-Session-Id",
            )
        )
    factor = affinity.get("balance_factor")
    low, high = BALANCE_FACTOR_RANGE
    if isinstance(factor, bool) or not isinstance(factor, int) or not low <= factor <= high:
        problems.append(
            (
                "proxy_affinity_balance_factor",
                factor,
                f"proxy_affinity_balance_factor is {factor!r}; HAProxy's hash-balance-factor is a percentage of the "
                f"average load, {low}..{high} (125..200 is usual; 150 the default)",
            )
        )
    return problems


@rule("proxy_affinity", pitfall="input validation")
def proxy_affinity(ctx):
    api = ctx.api
    if api is None or api.get("affinity") is None:
        return
    for variable, value, message in affinity_problems(api["affinity"]):
        yield violation(ALL_NODES, "proxy_affinity", f"{variable}={value}", message)
