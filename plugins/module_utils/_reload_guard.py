# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Is a ``systemctl daemon-reload`` safe for the running GPU containers of a node? (issue 39, item 1)

The pitfall (NVIDIA/nvidia-container-toolkit#48, #1227; NVIDIA's notice NVIDIA/nvidia-docker#1730): with Docker's
``systemd`` cgroup driver, systemd owns each container's device cgroup, and a daemon-reload rewrites it from what the
unit names. runc names a device by its ``/dev/char/<major>:<minor>`` link; NVIDIA's device nodes have none unless
someone makes them, so the reload drops them and every running GPU container says ``Failed to initialize NVML: Unknown
Error`` until it is recreated, the host being fine. The collection itself reloads systemd on a serving node (its unit
files, drop-ins, the warm agent, the firewall, monitoring; and ``systemctl enable`` reloads too).

The guard holds when either:
- the engine runs the ``cgroupfs`` driver (``docker info``'s CgroupDriver; the site's choice, set in
  ``/etc/docker/daemon.json`` as ``"exec-opts": ["native.cgroupdriver=cgroupfs"]``); or
- for the ``systemd`` driver, every NVIDIA character device node has its ``/dev/char`` link (what
  ``nvidia-ctk system create-dev-char-symlinks --create-all`` makes, idempotently) and the udev rule that makes them
  again whenever the driver binds is installed (NVIDIA's workaround, NVIDIA/nvidia-docker#1671, comment by klueska,
  2023-02-06: ``ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia", RUN+="/usr/bin/nvidia-ctk system
  create-dev-char-symlinks --create-all"``).

NVIDIA/nvidia-container-toolkit#192 reports a runc/eBPF case where the links existed and the reload still detached the
GPU: the links are NVIDIA's documented fix, cgroupfs the stronger one; both are accepted here, as NVIDIA documents both.

Pure functions over what the module (plugins/modules/reload_guard_state.py) read on the node.
"""

from __future__ import annotations

import json

DRIVERS = ("cgroupfs", "systemd")
# What the udev rule runs (NVIDIA/nvidia-docker#1671): the same command the role runs once to make the links now.
CREATE_ARGS = ("system", "create-dev-char-symlinks", "--create-all")
# A rule file counts only if it runs that command (a file of that name with anything else in it does not).
RULE_MARK = "create-dev-char-symlinks"
CGROUPFS_FIX = (
    'switch Docker to the cgroupfs driver: "exec-opts": ["native.cgroupdriver=cgroupfs"] in /etc/docker/daemon.json, '
    "then restart Docker (which recreates every container: do it drained)"
)


def udev_rule(nvidia_ctk):
    """The udev rule: make the /dev/char links whenever the NVIDIA driver binds (NVIDIA/nvidia-docker#1671)."""
    return 'ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia", RUN+="{} {}"'.format(nvidia_ctk, " ".join(CREATE_ARGS))


def daemon_json_driver(text):
    """The cgroup driver /etc/docker/daemon.json asks for (``exec-opts`` ``native.cgroupdriver=...``), or None."""
    try:
        config = json.loads(text or "{}")
    except ValueError:
        return None
    if not isinstance(config, dict):
        return None
    for opt in config.get("exec-opts") or ():
        key, _sep, value = str(opt).partition("=")
        if key.strip() == "native.cgroupdriver":
            return value.strip()
    return None


def missing_links(devices, links):
    """The NVIDIA device nodes runc cannot name: ``devices`` [{path, major, minor}], ``links`` {"M:m": target path}.

    A link counts when it exists and points at that device node (``/dev/char/195:255 -> ../nvidiactl``)."""
    missing = []
    for device in devices:
        key = "{}:{}".format(device["major"], device["minor"])
        if links.get(key) != device["path"]:
            missing.append(dict(device, link=key))
    return missing


def verdict(node, driver, devices, links, rule_text, nvidia_ctk_present, nvidia_ctk, rule_path, create, daemon_driver):
    """Whether a daemon-reload is safe on ``node`` now, and whether the role can make it so.

    driver: ``docker info``'s CgroupDriver; devices / links: as ``missing_links``; rule_text: the udev rule file's
    text (None: absent); nvidia_ctk_present: the command exists; create: the role may run it and write the rule
    (``reload_guard_create``); daemon_driver: what daemon.json asks for (None: nothing).
    Returns {node, driver, guarded, how, missing_links, rule_ok, can_create, problem}: ``problem`` is None where the
    guard holds or the role will make it hold (``can_create``), else one line with the node, the figures and the fix.
    """
    missing = missing_links(devices, links)
    rule_ok = rule_text is not None and RULE_MARK in rule_text
    result = {
        "node": node,
        "driver": driver,
        "devices": len(devices),
        "guarded": False,
        "how": None,
        "missing_links": [m["link"] + " -> " + m["path"] for m in missing],
        "rule_ok": rule_ok,
        "can_create": False,
        "problem": None,
    }
    if driver == "cgroupfs":
        result.update(guarded=True, how="Docker's cgroupfs driver: systemd owns no container's device cgroup")
        return result
    if driver != "systemd":
        result["problem"] = (
            f"{node}: Docker reports the cgroup driver {driver!r}, neither cgroupfs nor systemd: the collection cannot "
            "tell whether a systemctl daemon-reload would detach the GPU from its running containers "
            "(NVIDIA/nvidia-container-toolkit#48). Fix: " + CGROUPFS_FIX
        )
        return result
    if not missing and rule_ok:
        result.update(
            guarded=True,
            how=f"systemd driver with every NVIDIA device node linked in /dev/char ({len(devices)}) and the udev "
            f"rule {rule_path}",
        )
        return result
    # What the role can do itself: the links need nvidia-ctk (when any is missing); the rule is a file.
    result["can_create"] = bool(create) and (nvidia_ctk_present or not missing)
    if result["can_create"]:
        return result
    wrong = []
    if missing:
        wrong.append(
            "{} NVIDIA device node(s) without a /dev/char link ({})".format(
                len(missing), ", ".join(result["missing_links"][:4]) + (", ..." if len(missing) > 4 else "")
            )
        )
    if not rule_ok:
        wrong.append(f"no udev rule {rule_path} running nvidia-ctk {' '.join(CREATE_ARGS)}")
    if create and missing and not nvidia_ctk_present:
        wrong.append(f"{nvidia_ctk} is not installed (nvidia-container-toolkit), so the role cannot make the links")
    chose = (
        f" /etc/docker/daemon.json asks for native.cgroupdriver={daemon_driver}, but the running engine still uses "
        "systemd: restart Docker (drained) to apply it."
        if daemon_driver == "cgroupfs"
        else ""
    )
    result["problem"] = (
        f"{node}: Docker uses the systemd cgroup driver with {' and '.join(wrong)}: a systemctl daemon-reload (which "
        "the collection's roles run when they write units) would detach the GPU from every running container "
        "('Failed to initialize NVML: Unknown Error'; NVIDIA/nvidia-container-toolkit#48, #1227).{} Fix: set "
        "reload_guard_create: true with nvidia-container-toolkit installed (the role runs {} {} and writes the "
        "udev rule), or {}".format(chose, nvidia_ctk, " ".join(CREATE_ARGS), CGROUPFS_FIX)
    )
    return result
