#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Module gb10.serving.reload_guard_state: whether a systemctl daemon-reload would detach the GPU from containers."""

from __future__ import annotations

DOCUMENTATION = r"""
module: reload_guard_state
short_description: Say whether a systemctl daemon-reload is safe for this node's running GPU containers
description:
  - With Docker's systemd cgroup driver a daemon-reload revokes the NVIDIA devices of every running container unless
    each NVIDIA device node has its /dev/char link (NVIDIA/nvidia-container-toolkit#48, #1227).
  - Reads the NVIDIA character device nodes under O(dev_dir) (nvidia*, nvidia-caps/*), the links in O(dev_dir)/char,
    the udev rule file, /etc/docker/daemon.json and whether nvidia-ctk is installed; the cgroup driver comes from the
    engine (the engine API's GET /info (docker info), its C(CgroupDriver)).
  - The guard holds with the cgroupfs driver, or with the systemd driver when every device node is linked and the
    udev rule that links them again is installed.
options:
  node:
    description: The node's inventory name, for the message.
    type: str
    required: true
  cgroup_driver:
    description:
      - The engine's cgroup driver, as docker info reports it.
      - One of O(cgroup_driver) and O(docker_socket).
    type: str
  docker_socket:
    description:
      - The engine's socket, asked for its cgroup driver (GET /info, what C(docker info) reads) in this module run,
        where O(cgroup_driver) is not given. An engine that does not answer fails the task.
      - One of O(cgroup_driver) and O(docker_socket).
    type: path
  dev_dir:
    description: Where the device nodes are.
    type: path
    default: /dev
  udev_rule:
    description: The udev rule file that runs nvidia-ctk system create-dev-char-symlinks --create-all.
    type: path
    required: true
  nvidia_ctk:
    description: The nvidia-ctk command (nvidia-container-toolkit).
    type: path
    default: /usr/bin/nvidia-ctk
  daemon_json:
    description: Docker's daemon configuration (read for the driver the site asked for).
    type: path
    default: /etc/docker/daemon.json
  create:
    description: Whether the role may make the links and write the rule (then a node it can fix is no problem).
    type: bool
    default: false
extends_documentation_fragment:
  - gb10.serving.read_only
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Is a daemon-reload safe here?
  gb10.serving.reload_guard_state:
    node: "{{ inventory_hostname }}"
    docker_socket: /var/run/docker.sock
    udev_rule: /etc/udev/rules.d/71-nvidia-dev-char.rules
    create: true
"""

RETURN = r"""
guarded:
  description: Whether a daemon-reload is safe now.
  type: bool
  returned: always
how:
  description: Why it is safe (None when it is not).
  type: str
  returned: always
driver:
  description: The engine's cgroup driver.
  type: str
  returned: always
devices:
  description: How many NVIDIA device nodes the node has.
  type: int
  returned: always
missing_links:
  description: The /dev/char links that are missing, as "major:minor -> device node".
  type: list
  elements: str
  returned: always
rule_ok:
  description: Whether the udev rule file runs nvidia-ctk's create-dev-char-symlinks.
  type: bool
  returned: always
can_create:
  description: Whether the role can make the guard hold itself (create is on and it has what it needs).
  type: bool
  returned: always
problem:
  description: The refusal, with the node and the fix; None where the guard holds or the role will make it hold.
  type: str
  returned: always
rule:
  description: The udev rule line the role writes.
  type: str
  returned: always
"""

import http.client
import json
import os
import socket
import stat

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils import _reload_guard as guard


def _devices(dev_dir):
    """Every NVIDIA character device node: /dev/nvidia*, /dev/nvidia-caps/* (what the toolkit injects)."""
    found = []
    places = [(dev_dir, "nvidia"), (os.path.join(dev_dir, "nvidia-caps"), "")]
    for folder, prefix in places:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            if not name.startswith(prefix):
                continue
            try:
                info = os.stat(path)
            except OSError:
                continue
            if stat.S_ISCHR(info.st_mode):
                found.append(
                    {"path": os.path.realpath(path), "major": os.major(info.st_rdev), "minor": os.minor(info.st_rdev)}
                )
    return found


def _links(dev_dir):
    folder = os.path.join(dev_dir, "char")
    try:
        names = os.listdir(folder)
    except OSError:
        return {}
    return {name: os.path.realpath(os.path.join(folder, name)) for name in names}


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


class _EngineConnection(http.client.HTTPConnection):
    """HTTP over the engine's unix socket. Not ansible.module_utils.urls.open_url(unix_socket=...): its Request.open
    installs its opener process-wide (urllib.request.install_opener), so every later urllib request of the process
    goes to that socket (a module imported into a test process broke that process's other HTTP clients)."""

    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self._path)


def _engine_driver(module, socket_path):
    """The engine's CgroupDriver from its own API over its socket (GET /info), as ansible.builtin.uri asked it."""
    connection = _EngineConnection(socket_path, 30)
    try:
        connection.request("GET", "/info")
        answer = connection.getresponse()
        body = answer.read()
        if answer.status != 200:
            raise OSError(f"HTTP {answer.status}: {body[:200]!r}")
        return json.loads(body).get("CgroupDriver") or ""
    except (OSError, ValueError, http.client.HTTPException) as exc:
        module.fail_json(
            msg=f"{module.params['node']}: the Docker engine at {socket_path} did not answer GET /info ({exc}): "
            f"is docker.service running? (systemctl status docker)"
        )
    finally:
        connection.close()


def main():
    module = AnsibleModule(
        argument_spec={
            "node": {"type": "str", "required": True},
            "cgroup_driver": {"type": "str"},
            "docker_socket": {"type": "path"},
            "dev_dir": {"type": "path", "default": "/dev"},
            "udev_rule": {"type": "path", "required": True},
            "nvidia_ctk": {"type": "path", "default": "/usr/bin/nvidia-ctk"},
            "daemon_json": {"type": "path", "default": "/etc/docker/daemon.json"},
            "create": {"type": "bool", "default": False},
        },
        required_one_of=[["cgroup_driver", "docker_socket"]],
        supports_check_mode=True,
    )
    params = module.params
    driver = params["cgroup_driver"]
    if driver is None:
        driver = _engine_driver(module, params["docker_socket"])
    result = guard.verdict(
        node=params["node"],
        driver=driver,
        devices=_devices(params["dev_dir"]),
        links=_links(params["dev_dir"]),
        rule_text=_read(params["udev_rule"]),
        nvidia_ctk_present=os.access(params["nvidia_ctk"], os.X_OK),
        nvidia_ctk=params["nvidia_ctk"],
        rule_path=params["udev_rule"],
        create=params["create"],
        daemon_driver=guard.daemon_json_driver(_read(params["daemon_json"])),
    )
    result.pop("node")
    module.exit_json(changed=False, rule=guard.udev_rule(params["nvidia_ctk"]), **result)


if __name__ == "__main__":
    main()
