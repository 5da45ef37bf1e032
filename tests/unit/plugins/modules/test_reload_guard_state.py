# Copyright: gb10.serving maintainers
# Apache-2.0
"""The reload_guard_state module on a fake /dev in tmp: real character device nodes (mknod) and real links."""

from __future__ import annotations

import importlib
import os
import stat

import pytest
from module_harness import run_main

reload_guard_state = importlib.import_module("ansible_collections.gb10.serving.plugins.modules.reload_guard_state")


def _no_commands(self, cmd, **_kwargs):
    raise AssertionError(f"reload_guard_state runs no command: {cmd}")


@pytest.fixture
def dev(tmp_path):
    try:
        os.mknod(tmp_path / "nvidiactl", 0o600 | stat.S_IFCHR, os.makedev(195, 255))
        os.mknod(tmp_path / "nvidia0", 0o600 | stat.S_IFCHR, os.makedev(195, 0))
    except PermissionError:
        pytest.skip("mknod needs CAP_MKNOD")
    (tmp_path / "nvidia-not-a-device").write_text("")
    (tmp_path / "char").mkdir()
    return tmp_path


def _run(dev, tmp_path, **args):
    rule = tmp_path / "71-nvidia-dev-char.rules"
    base = {"node": "spark-1", "cgroup_driver": "systemd", "dev_dir": str(dev), "udev_rule": str(rule)}
    base["daemon_json"] = str(tmp_path / "daemon.json")
    return run_main(reload_guard_state.main, {**base, **args}, _no_commands)


def test_pitfall_daemon_reload_detaches_gpu_module_reads_devices_and_links(dev, tmp_path):
    found = _run(dev, tmp_path)
    assert found["devices"] == 2 and not found["guarded"]
    assert sorted(found["missing_links"]) == [f"195:0 -> {dev}/nvidia0", f"195:255 -> {dev}/nvidiactl"]
    assert found["problem"].startswith("spark-1: Docker uses the systemd cgroup driver with 2 NVIDIA device node(s)")
    # what nvidia-ctk makes: /dev/char/195:255 -> ../nvidiactl
    os.symlink("../nvidiactl", dev / "char" / "195:255")
    os.symlink("../nvidia0", dev / "char" / "195:0")
    (tmp_path / "71-nvidia-dev-char.rules").write_text(found["rule"] + "\n")
    found = _run(dev, tmp_path)
    assert found["guarded"] and found["missing_links"] == [] and found["problem"] is None
    assert found["changed"] is False


def test_pitfall_daemon_reload_detaches_gpu_module_cgroupfs_holds(dev, tmp_path):
    assert _run(dev, tmp_path, cgroup_driver="cgroupfs")["guarded"]
