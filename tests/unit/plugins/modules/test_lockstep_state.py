# Copyright: gb10.serving maintainers
# Apache-2.0
"""The lockstep_state module: gathering on a fake node (run_command patched, a real /lib/modules tree in tmp)."""

from __future__ import annotations

import importlib
from pathlib import Path
from unittest import mock

from module_harness import run_main

REPO = Path(__file__).resolve().parents[4]
FIXTURES = REPO / "tests" / "unit" / "fixtures" / "lockstep"
lockstep_state = importlib.import_module("ansible_collections.gb10.serving.plugins.modules.lockstep_state")


def build_module(args, dpkg_fixture, depends=None, dpkg_rc=0):
    """An AnsibleModule for lockstep_state whose run_command answers like the node described by the fixtures."""
    depends = depends or {}

    def run_command(self, cmd, **_kwargs):
        assert cmd[:2] == ["dpkg-query", "-W"]
        if cmd[2] == "-f=" + lockstep_state.DPKG_QUERY_FORMAT:
            return dpkg_rc, (FIXTURES / dpkg_fixture).read_text(), "" if dpkg_rc == 0 else "dpkg-query: error"
        names = cmd[3:]
        lines = [f"{name}\t{depends[name]}" for name in names if name in depends]
        return (0 if len(lines) == len(names) else 1), "\n".join(lines) + "\n", ""

    return run_command


def run_module(args, dpkg_fixture, depends=None, dpkg_rc=0):
    return run_main(lockstep_state.main, args, build_module(args, dpkg_fixture, depends, dpkg_rc))


def make_tree(root, layout):
    for release, files in layout.items():
        (root / release / "kernel" / "drivers").mkdir(parents=True, exist_ok=True)
        for rel in files:
            target = root / release / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(b"\x28\xb5\x2f\xfd")
    return str(root)


META_DEPENDS_1014 = {
    "linux-modules-nvidia-580-open-nvidia-hwe-24.04": (FIXTURES / "depends_modules_meta_6.17.0-1014.txt")
    .read_text()
    .strip(),
    "linux-image-nvidia-hwe-24.04": (FIXTURES / "depends_image_meta_6.17.0-1014.txt").read_text().strip(),
}


def test_lockstep_state_module_reports_covered_with_held_packages(tmp_path):
    root = make_tree(
        tmp_path, {"6.17.0-1014-nvidia": ["kernel/nvidia-580-open/nvidia.ko.zst"], "6.11.0-1016-nvidia": []}
    )
    result = run_module(
        {
            "running_kernel": "6.17.0-1014-nvidia",
            "modules_root": root,
            "node_name": "spark-1",
            "packages": ["nvidia-driver-580-open", "linux-modules-nvidia-580-open-6.11.0-1016-nvidia", "absent-pkg"],
        },
        "dpkg_covered_6.17.0-1014.txt",
        META_DEPENDS_1014,
    )
    assert not result["failed"]
    assert result["changed"] is False
    assert result["verdict"] == "covered"
    assert result["nvidia_modules"] == {"6.17.0-1014-nvidia": ["kernel/nvidia-580-open/nvidia.ko.zst"]}
    assert result["modules_meta_target"] == "6.17.0-1014-nvidia"
    assert result["packages"]["nvidia-driver-580-open"] == {
        "version": "580.142-0ubuntu0.24.04.1",
        "held": True,
        "installed": True,
    }
    assert result["packages"]["linux-modules-nvidia-580-open-6.11.0-1016-nvidia"]["installed"] is False
    assert result["packages"]["absent-pkg"] == {"version": "", "held": False, "installed": False}
    assert result["warnings_emitted"] == []


def test_pitfall_pinpoint_kernel_ahead_of_metapackages_is_exposed_through_the_module(tmp_path):
    root = make_tree(tmp_path, {"6.17.0-1032-nvidia": ["kernel/nvidia-580-open/nvidia.ko"], "7.0.0-1019-nvidia": []})
    depends = {
        "linux-modules-nvidia-580-open-nvidia-hwe-24.04": (
            FIXTURES / "depends_modules_meta_6.17.0-1032.txt"
        ).read_text(),
        "linux-image-nvidia-hwe-24.04": (FIXTURES / "depends_image_meta_6.17.0-1032.txt").read_text(),
    }
    result = run_module(
        {"running_kernel": "7.0.0-1019-nvidia", "modules_root": root, "node_name": "spark-1"},
        "dpkg_pinpoint_7.0.0-1019.txt",
        depends,
    )
    assert not result["failed"], "the module reports; the role decides"
    assert result["verdict"] == "exposed"
    assert result["missing_package"] == "linux-modules-nvidia-580-open-7.0.0-1019-nvidia"
    assert any("ahead of" in warning for warning in result["warnings_emitted"])


def test_pending_reboot_is_a_warning_from_the_module(tmp_path):
    root = make_tree(
        tmp_path,
        {
            "6.17.0-1014-nvidia": ["kernel/nvidia-580-open/nvidia.ko"],
            "6.17.0-1018-nvidia": ["kernel/nvidia-580-open/nvidia.ko.zst"],
        },
    )
    depends = {
        "linux-modules-nvidia-580-open-nvidia-hwe-24.04": (
            FIXTURES / "depends_modules_meta_6.17.0-1018.txt"
        ).read_text(),
        "linux-image-nvidia-hwe-24.04": (FIXTURES / "depends_image_meta_6.17.0-1018.txt").read_text(),
    }
    result = run_module(
        {"running_kernel": "6.17.0-1014-nvidia", "modules_root": root},
        "dpkg_upgraded_not_rebooted_6.17.0-1018.txt",
        depends,
    )
    assert result["verdict"] == "pending-reboot"
    assert result["ok"] is True
    assert any(warning.startswith("PENDING REBOOT") for warning in result["warnings_emitted"])


def test_lockstep_state_module_only_walks_nvidia_dirs_under_kernel(tmp_path):
    root = make_tree(
        tmp_path,
        {"6.17.0-1014-nvidia": ["kernel/drivers/video/nvidia.ko", "updates/dkms/nvidia.ko.xz"]},
    )
    result = run_module(
        {"running_kernel": "6.17.0-1014-nvidia", "modules_root": root},
        "dpkg_covered_6.17.0-1014.txt",
        META_DEPENDS_1014,
    )
    assert result["nvidia_modules"] == {"6.17.0-1014-nvidia": ["updates/dkms/nvidia.ko.xz"]}


def test_lockstep_state_module_running_kernel_defaults_to_uname(tmp_path):
    root = make_tree(tmp_path, {"6.17.0-1014-nvidia": ["kernel/nvidia-580-open/nvidia.ko"]})
    fake_uname = mock.Mock(release="6.17.0-1014-nvidia", nodename="spark-9")
    with mock.patch.object(lockstep_state.os, "uname", return_value=fake_uname):
        result = run_module({"modules_root": root}, "dpkg_covered_6.17.0-1014.txt", META_DEPENDS_1014)
    assert result["running_kernel"] == "6.17.0-1014-nvidia"
    assert "spark-9" in result["message"]


def test_lockstep_state_module_fails_when_dpkg_query_fails(tmp_path):
    result = run_module(
        {"running_kernel": "6.17.0-1014-nvidia", "modules_root": str(tmp_path)}, "ls_lib_modules.txt", dpkg_rc=2
    )
    assert result["failed"]
    assert "dpkg-query -W failed" in result["msg"]


def test_lockstep_state_module_missing_modules_root_is_exposed_not_a_crash(tmp_path):
    result = run_module(
        {"running_kernel": "6.17.0-1014-nvidia", "modules_root": str(tmp_path / "absent")},
        "dpkg_covered_6.17.0-1014.txt",
        META_DEPENDS_1014,
    )
    assert result["verdict"] == "exposed"
