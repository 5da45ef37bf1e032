# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 39, item 1: a systemctl daemon-reload detaching the GPU from running containers (systemd cgroup driver).

NVIDIA/nvidia-container-toolkit#48, #1227; the fix NVIDIA documents (NVIDIA/nvidia-docker#1671): /dev/char links by
``nvidia-ctk system create-dev-char-symlinks --create-all`` plus its udev rule, or Docker's cgroupfs driver."""

from __future__ import annotations

import json
from pathlib import Path

from ansible_collections.gb10.serving.plugins.module_utils import _reload_guard as guard

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "reload_guard"
RULE = "/etc/udev/rules.d/71-nvidia-dev-char.rules"
CTK = "/usr/bin/nvidia-ctk"
# The device nodes of a GB10 as NVIDIA's issues list them (majors 195 and the nvidia-caps major; NVIDIA/
# nvidia-container-toolkit#192, #381): /dev/nvidia0, /dev/nvidiactl, and a capability.
DEVICES = [
    {"path": "/dev/nvidia0", "major": 195, "minor": 0},
    {"path": "/dev/nvidiactl", "major": 195, "minor": 255},
    {"path": "/dev/nvidia-caps/nvidia-cap1", "major": 235, "minor": 1},
]
LINKED = {
    "195:0": "/dev/nvidia0",
    "195:255": "/dev/nvidiactl",
    "235:1": "/dev/nvidia-caps/nvidia-cap1",
    "1:3": "/dev/null",
}


def _verdict(driver="systemd", devices=None, links=None, rule=None, ctk=True, create=False, daemon=None):
    return guard.verdict(
        "spark-1",
        driver,
        DEVICES if devices is None else devices,
        {} if links is None else links,
        rule,
        ctk,
        CTK,
        RULE,
        create,
        daemon,
    )


def test_pitfall_daemon_reload_detaches_gpu_systemd_driver_without_dev_char_links_refused():
    found = _verdict()
    assert not found["guarded"] and not found["can_create"]
    problem = found["problem"]
    assert problem.startswith("spark-1: Docker uses the systemd cgroup driver with 3 NVIDIA device node(s) without")
    assert "195:255 -> /dev/nvidiactl" in problem
    assert "Failed to initialize NVML: Unknown Error" in problem
    assert "nvidia-container-toolkit#48" in problem
    # both fixes NVIDIA documents are named
    assert "nvidia-ctk system create-dev-char-symlinks --create-all" in problem
    assert "native.cgroupdriver=cgroupfs" in problem


def test_pitfall_daemon_reload_detaches_gpu_cgroupfs_driver_holds():
    found = _verdict(driver="cgroupfs")
    assert found["guarded"] and found["problem"] is None
    assert "cgroupfs" in found["how"]


def test_pitfall_daemon_reload_detaches_gpu_links_and_rule_hold():
    found = _verdict(links=LINKED, rule=guard.udev_rule(CTK))
    assert found["guarded"] and found["problem"] is None and found["missing_links"] == []


def test_pitfall_daemon_reload_detaches_gpu_links_without_rule_refused():
    """The links alone are lost when the driver reloads (a new boot, a driver upgrade): the rule is needed too."""
    found = _verdict(links=LINKED, rule="# some other rule\n")
    assert not found["guarded"]
    assert "no udev rule " + RULE in found["problem"]


def test_pitfall_daemon_reload_detaches_gpu_a_link_to_another_node_counts_as_missing():
    links = dict(LINKED, **{"195:0": "/dev/null"})
    found = _verdict(links=links, rule=guard.udev_rule(CTK))
    assert found["missing_links"] == ["195:0 -> /dev/nvidia0"]


def test_pitfall_daemon_reload_detaches_gpu_role_makes_the_guard_with_nvidia_ctk():
    found = _verdict(create=True)
    assert found["can_create"] and found["problem"] is None and not found["guarded"]


def test_pitfall_daemon_reload_detaches_gpu_no_nvidia_ctk_to_make_links_refused():
    found = _verdict(create=True, ctk=False)
    assert not found["can_create"]
    assert "/usr/bin/nvidia-ctk is not installed" in found["problem"]


def test_pitfall_daemon_reload_detaches_gpu_rule_alone_needs_no_nvidia_ctk():
    """A node with no NVIDIA device node (the simulation's) has no link to make; the rule is a file."""
    found = _verdict(devices=[], create=True, ctk=False)
    assert found["can_create"] and found["problem"] is None
    found = _verdict(devices=[], rule=guard.udev_rule(CTK))
    assert found["guarded"] and "(0)" in found["how"]


def test_pitfall_daemon_reload_detaches_gpu_cgroupfs_asked_but_engine_not_restarted():
    found = _verdict(daemon="cgroupfs")
    assert "asks for native.cgroupdriver=cgroupfs, but the running engine still uses systemd" in found["problem"]


def test_pitfall_daemon_reload_detaches_gpu_unknown_driver_refused():
    found = _verdict(driver="")
    assert not found["guarded"] and "neither cgroupfs nor systemd" in found["problem"]


def test_udev_rule_is_nvidias_line():
    assert guard.udev_rule(CTK) == (
        'ACTION=="add", DEVPATH=="/bus/pci/drivers/nvidia", '
        'RUN+="/usr/bin/nvidia-ctk system create-dev-char-symlinks --create-all"'
    )


def test_engine_info_of_both_drivers_as_the_engine_answers():
    """GET /info as two real Docker 20.10.24 engines answered it: a sim node's (daemon.json asks for systemd) and the
    host's (cgroupfs, its default on cgroup v1)."""
    systemd = json.loads((FIXTURES / "docker_info_api_20.10.24_systemd_driver.json").read_text())
    cgroupfs = json.loads((FIXTURES / "docker_info_api_20.10.24_cgroupfs_driver.json").read_text())
    assert systemd["CgroupDriver"] == "systemd" and cgroupfs["CgroupDriver"] == "cgroupfs"
    assert _verdict(driver=systemd["CgroupDriver"])["problem"]
    assert _verdict(driver=cgroupfs["CgroupDriver"])["guarded"]


def test_daemon_json_driver():
    assert guard.daemon_json_driver((FIXTURES / "daemon.json_sim_node_systemd.json").read_text()) == "systemd"
    assert guard.daemon_json_driver('{"exec-opts": ["native.cgroupdriver=cgroupfs"]}') == "cgroupfs"
    assert guard.daemon_json_driver("{}") is None
    assert guard.daemon_json_driver("not json") is None
    assert guard.daemon_json_driver(None) is None
