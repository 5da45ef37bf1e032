# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""HAProxy runtime API: parse `show servers state`, build `set server` commands, read their answers; the records
of servers held out across restarts.

Pure functions; ``plugins/modules/haproxy_server.py`` talks to the socket and writes the records. Used for drain and
ready without a reload (DESIGN section 6: the rolling upgrade drains a node in the proxy first).

A drain or maint with a record folder is also written to ``<folder>/<backend>/<server>`` on the proxy's node, and
only a ready removes it: roles/proxy's haproxy.service drop-in (gb10-haproxy-save-state) puts every recorded server
in the server-state file HAProxy loads at each start and reload, so a replica left drained by a failed upgrade or
tool-calling gate stays out across proxy restarts and reboots (issue 19, item 6).
"""

from __future__ import annotations

import json
import posixpath
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
_NAME = re.compile(r"^[A-Za-z0-9_.:-]+\Z")


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


# The states a record holds a server in (ready removes the record).
HELD_STATES = ("drain", "maint")


def record_path(directory, backend, name):
    """<directory>/<backend>/<server>: the record of one held server (names checked as for the runtime API)."""
    for label, value in (("backend", backend), ("server", name)):
        if not _NAME.match(str(value)) or str(value) in (".", ".."):
            raise ValueError(f"{label} name {value!r} holds characters the runtime API cannot take")
    return posixpath.join(directory, backend, name)


def parse_record(text):
    """A record's content ({"state": "drain"|"maint", "reason": ..., "since": epoch}), or None when it holds nothing
    (unreadable, or a state other than drain/maint: gb10-haproxy-save-state ignores it as well)."""
    try:
        record = json.loads(text)
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("state") not in HELD_STATES:
        return None
    return record


def record_text(backend, name, state, reason, since):
    return (
        json.dumps(
            {"backend": backend, "server": name, "state": state, "reason": reason or "", "since": since}, sort_keys=True
        )
        + "\n"
    )


def record_change(current, state, reason=None, present=None):
    """What the record of a server must become for admin state ``state``: "write", "remove" or None (as it is).
    ``current``: parse_record() of the file there (None when there is none or it holds nothing); ``present``: a
    file is there at all (default: ``current`` is not None), so that ready also removes one that holds nothing."""
    if state == "ready":
        return "remove" if (current is not None if present is None else present) else None
    if current is None or current.get("state") != state:
        return "write"
    if reason and current.get("reason") != reason:
        return "write"
    return None
