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
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: In check mode the state is read and the change is reported, not sent.
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

- name: Read every replica's state
  gb10.serving.haproxy_server:
    backend: vllm
  register: proxy_state
"""

RETURN = r"""
servers:
  description: Servers of the backend after the change, as C(show servers state) reports them.
  returned: always
  type: list
  elements: dict
  sample: [{"backend": "vllm", "name": "spark-1", "address": "10.77.0.11", "port": 8000, "operational": "running",
            "up": true, "admin": "ready", "admin_state": 0, "check_health": 3, "weight": 1}]
before:
  description: Admin state of I(name) before the change (ready, drain or maint).
  returned: when name is given
  type: str
"""

import socket

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


def run(module):
    params = module.params
    backend, name, state = params["backend"], params["name"], params["state"]
    if state and not name:
        module.fail_json(msg=f"state needs name: which server of backend {backend} to set")
    try:
        servers = _haproxy.select(
            _haproxy.parse_servers_state(_ask(params["socket"], "show servers state", params["timeout"])), backend
        )
        result = {"changed": False, "servers": servers}
        if name is None:
            return result
        found = _haproxy.select(servers, backend, name)
        if not found:
            known = ", ".join(s["name"] for s in servers) or "none"
            module.fail_json(msg=f"backend {backend} has no server {name} (servers: {known})", servers=servers)
        result["before"] = found[0]["admin"]
        if state and found[0]["admin"] != state:
            result["changed"] = True
            if not module.check_mode:
                command = _haproxy.set_state_command(backend, name, state)
                _haproxy.check_answer(command, _ask(params["socket"], command, params["timeout"]))
                state_text = _ask(params["socket"], "show servers state", params["timeout"])
                result["servers"] = _haproxy.select(_haproxy.parse_servers_state(state_text), backend)
        return result
    except OSError as err:
        module.fail_json(msg=f"cannot talk to HAProxy's runtime API at {params['socket']}: {err}")
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
        },
        supports_check_mode=True,
    )
    module.exit_json(**run(module))


if __name__ == "__main__":
    main()
