# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""HAProxy runtime API: parse `show servers state`, build `set server` commands, read their answers.

Pure functions; ``plugins/modules/haproxy_server.py`` talks to the socket. Used for drain and ready without a
reload (DESIGN section 6: the rolling upgrade drains a node in the proxy first).
"""

from __future__ import annotations

import re

# `show servers state` format version 1: these first fields are the same from 1.6 to 2.8 (later ones are added).
V1_FIELDS = [
    "be_id",
    "be_name",
    "srv_id",
    "srv_name",
    "srv_addr",
    "srv_op_state",
    "srv_admin_state",
    "srv_uweight",
    "srv_iweight",
    "srv_time_since_last_change",
    "srv_check_status",
    "srv_check_result",
    "srv_check_health",
    "srv_check_state",
    "srv_agent_state",
    "bk_f_forced_id",
    "srv_f_forced_id",
    "srv_fqdn",
    "srv_port",
]
OP_STATES = {0: "stopped", 1: "starting", 2: "running", 3: "stopping"}
# srv_admin_state bits (include/haproxy/server-t.h): forced/inherited/config maint, forced/inherited drain,
# resolution maint, hostname maint.
ADMIN_MAINT = 0x01 | 0x02 | 0x04 | 0x20 | 0x40
ADMIN_DRAIN = 0x08 | 0x10
STATES = ("ready", "drain", "maint")
_NAME = re.compile(r"^[A-Za-z0-9_.:-]+$")


class RuntimeApiError(Exception):
    """The runtime API refused a command; the message is HAProxy's own line."""


def parse_servers_state(text):
    """Servers from `show servers state` output: one dict per data row, with the admin state decoded."""
    fields = list(V1_FIELDS)
    servers = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("# be_id"):
            header = stripped[1:].split()
            # a header cut short (wrapped by a terminal or a document) is ignored: version 1's fields stand
            fields = header if set(V1_FIELDS) <= set(header) else fields
            continue
        words = stripped.split()
        if len(words) < len(V1_FIELDS) or not words[0].isdigit():
            continue
        row = dict(zip(fields, words, strict=False))
        admin = int(row["srv_admin_state"])
        op_state = int(row["srv_op_state"])
        servers.append(
            {
                "backend": row["be_name"],
                "name": row["srv_name"],
                "address": row["srv_addr"],
                "port": int(row["srv_port"]) if row["srv_port"].isdigit() else None,
                "operational": OP_STATES.get(op_state, str(op_state)),
                "up": op_state == 2,
                "admin": "maint" if admin & ADMIN_MAINT else "drain" if admin & ADMIN_DRAIN else "ready",
                "admin_state": admin,
                "check_health": int(row["srv_check_health"]),
                "weight": int(row["srv_uweight"]),
            }
        )
    return servers


def select(servers, backend, name=None):
    return [s for s in servers if s["backend"] == backend and (name is None or s["name"] == name)]


def set_state_command(backend, name, state):
    """`set server <backend>/<server> state ready|drain|maint`, refusing names that could inject commands."""
    if state not in STATES:
        raise ValueError(f"state {state!r} is not one of {', '.join(STATES)}")
    for label, value in (("backend", backend), ("server", name)):
        if not _NAME.match(str(value)):
            raise ValueError(f"{label} name {value!r} holds characters the runtime API cannot take")
    return f"set server {backend}/{name} state {state}"


def check_answer(command, answer):
    """A state change answers with an empty line; anything else is HAProxy's error text."""
    text = answer.strip()
    if text:
        raise RuntimeApiError(f"{command!r} was refused: {text}")
