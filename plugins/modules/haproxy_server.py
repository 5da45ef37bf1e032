#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Module gb10.serving.haproxy_server: read or set a backend server's admin state through HAProxy's runtime API."""

from __future__ import annotations

DOCUMENTATION = r"""
module: haproxy_server
short_description: Drain, ready or read HAProxy backend servers through the runtime API
description:
  - Reads C(show servers state) from HAProxy's admin socket and returns every server of I(backend).
  - With I(name) and I(state), sets C(set server <backend>/<name> state <state>) when the server's admin state
    differs, without a reload, so queued and in-flight requests are kept.
  - With I(record_dir), the drain or maint also lasts across HAProxy restarts and reboots, not only reloads it
    writes C(<record_dir>/<backend>/<name>) on the proxy's node (first, so a failed runtime change still leaves the
    server held), and a ready removes it (after the runtime change). roles/proxy's haproxy.service drop-in puts every
    recorded server in the server-state file HAProxy loads at each start and reload. Without I(record_dir) the change
    is runtime only (a reload keeps it, a restart forgets it).
options:
  socket:
    description: Path of the admin socket (C(stats socket ... level admin)).
    type: path
    default: /run/haproxy/admin.sock
  backend:
    description: Backend name.
    type: str
    required: true
  name:
    description: Server name; required with I(state).
    type: str
  state:
    description: Admin state wanted for I(name).
    type: str
    choices: [ready, drain, maint]
  timeout:
    description: Seconds to wait for the socket.
    type: float
    default: 5
  record_dir:
    description:
      - Folder of the records of held servers on the proxy's node (roles/proxy's C(gb10_proxy_admin_state_dir)).
      - With I(state) drain or maint the record is written, with ready removed; without I(state) the records are
        read and each server's RV(servers[].held) says which one holds it.
    type: path
  reason:
    description: Why the server is held (kept in its record, shown by the proxy role and by RV(servers[].reason)).
    type: str
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: In check mode the state and the records are read and the change is reported, neither sent nor written.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
    details: Returns RV(before), the admin state before the change, but no diff.
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Drain spark-2 in the proxy
  gb10.serving.haproxy_server:
    backend: vllm
    name: spark-2
    state: drain

- name: Drain spark-2 in the proxy until a ready, across restarts and reboots of HAProxy
  gb10.serving.haproxy_server:
    backend: vllm
    name: spark-2
    state: drain
    record_dir: /var/lib/gb10/proxy-admin
    reason: rolling upgrade failed at the tool-calling gate

- name: Read every replica's state
  gb10.serving.haproxy_server:
    backend: vllm
    record_dir: /var/lib/gb10/proxy-admin
  register: proxy_state
"""

RETURN = r"""
servers:
  description: Servers of the backend after the change, as C(show servers state) reports them.
  returned: always
  type: list
  elements: dict
  sample: [{"backend": "vllm", "name": "spark-1", "address": "10.77.0.11", "port": 8000, "operational": "running",
            "up": true, "admin": "ready", "admin_state": 0, "check_health": 3, "weight": 1, "held": null,
            "reason": null}]
  contains:
    held:
      description: With I(record_dir), the state (drain or maint) the server's record holds it in across restarts, or
        null when none does.
      type: str
    reason:
      description: With I(record_dir), the held server's recorded reason, or null.
      type: str
before:
  description: Admin state of I(name) before the change (ready, drain or maint).
  returned: when name is given
  type: str
record:
  description: With I(record_dir) and I(state), what happened to I(name)'s record (written, removed or kept).
  returned: when record_dir and state are given
  type: str
"""

import os
import socket
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils import _haproxy


def _ask(path, command, timeout):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        conn.connect(path)
        conn.sendall(command.encode() + b"\n")
        chunks = []
        while True:
            data = conn.recv(65536)
            if not data:
                break
            chunks.append(data)
    return b"".join(chunks).decode(errors="replace")


def _read_record(path):
    """(parse_record() of the file, whether a file is there)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return _haproxy.parse_record(handle.read()), True
    except FileNotFoundError:
        return None, False
    except (OSError, UnicodeDecodeError):
        return None, os.path.lexists(path)


def _write_record(path, text):
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o755, exist_ok=True)
    handle, tmp = tempfile.mkstemp(prefix=".", dir=folder)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _with_records(servers, record_dir):
    """Each server with ``held`` and ``reason`` from its record (None without record_dir or record)."""
    for server in servers:
        record = None
        if record_dir:
            record, _problem = _read_record(_haproxy.record_path(record_dir, server["backend"], server["name"]))
        server["held"] = record["state"] if record else None
        server["reason"] = record.get("reason") if record else None
    return servers


def run(module):
    params = module.params
    backend, name, state, record_dir = params["backend"], params["name"], params["state"], params["record_dir"]
    if state and not name:
        module.fail_json(msg=f"state needs name: which server of backend {backend} to set")
    try:

        def servers_now():
            text = _ask(params["socket"], "show servers state", params["timeout"])
            return _with_records(_haproxy.select(_haproxy.parse_servers_state(text), backend), record_dir)

        servers = servers_now()
        result = {"changed": False, "servers": servers}
        if name is None:
            return result
        found = _haproxy.select(servers, backend, name)
        if not found:
            known = ", ".join(s["name"] for s in servers) or "none"
            module.fail_json(msg=f"backend {backend} has no server {name} (servers: {known})", servers=servers)
        result["before"] = found[0]["admin"]
        record_action = None
        if state and record_dir:
            path = _haproxy.record_path(record_dir, backend, name)
            current, present = _read_record(path)
            record_action = _haproxy.record_change(current, state, params["reason"], present)
            result["record"] = {"write": "written", "remove": "removed"}.get(record_action, "kept")
        runtime = bool(state) and found[0]["admin"] != state
        result["changed"] = runtime or record_action is not None
        if module.check_mode or not result["changed"]:
            return result
        # Held first, released last: a failure between the two leaves the server held, never the other way.
        if record_action == "write":
            since = current["since"] if current and current.get("state") == state and "since" in current else None
            _write_record(path, _haproxy.record_text(backend, name, state, params["reason"], since or int(time.time())))
        if runtime:
            command = _haproxy.set_state_command(backend, name, state)
            _haproxy.check_answer(command, _ask(params["socket"], command, params["timeout"]))
        if record_action == "remove":
            os.unlink(path)
        result["servers"] = servers_now()
        return result
    except OSError as err:
        where = f"{params['socket']} or {record_dir}" if record_dir else params["socket"]
        module.fail_json(msg=f"cannot talk to HAProxy's runtime API or write the record at {where}: {err}")
    except (ValueError, _haproxy.RuntimeApiError) as err:
        module.fail_json(msg=str(err))


def main():
    module = AnsibleModule(
        argument_spec={
            "socket": {"type": "path", "default": "/run/haproxy/admin.sock"},
            "backend": {"type": "str", "required": True},
            "name": {"type": "str"},
            "state": {"type": "str", "choices": list(_haproxy.STATES)},
            "timeout": {"type": "float", "default": 5},
            "record_dir": {"type": "path"},
            "reason": {"type": "str"},
        },
        supports_check_mode=True,
    )
    module.exit_json(**run(module))


if __name__ == "__main__":
    main()
