# Copyright: gb10.serving maintainers
# Apache-2.0
"""Kernel / NVIDIA module lockstep (seed 004 pitfall 3), on real-shaped dpkg output."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
FIXTURES = REPO / "tests" / "unit" / "fixtures" / "lockstep"
lockstep = importlib.import_module("ansible_collections.gb10.serving.plugins.module_utils._lockstep")

# The path modinfo reported on a DGX Spark for the prebuilt 580-open module (shared fixtures, section 3).
PREBUILT = ["kernel/nvidia-580-open/nvidia.ko", "kernel/nvidia-580-open/nvidia-uvm.ko"]


def fixture(name):
    return (FIXTURES / name).read_text()


def packages(name):
    return lockstep.parse_dpkg_query(fixture(name))


# ---------------------------------------------------------------------------------------------------- versions
@pytest.mark.parametrize(
    ("lower", "higher"),
    [
        ("6.17.0-1014.14", "6.17.0-1014.14+1"),
        ("6.17.0-1014.14+1", "6.17.0-1018.18"),
        ("6.11.0-1016.16+1000", "6.17.0-1014.14"),
        ("6.17.0-1032.32", "7.0.0-1019.19~24.04.2"),
        ("7.0.0-1019.19~24.04.2", "7.0.0-1019.19"),
        ("580.95.05-0ubuntu0.24.04.2", "580.142-0ubuntu0.24.04.1"),
        ("580.142-0ubuntu0.24.04.1", "580.159.03-0ubuntu0.24.04.1"),
        ("6.17.0-1014-nvidia", "6.17.0-1014-nvidia-64k"),
        ("6.17.0-1018-nvidia", "7.0.0-1019-nvidia"),
        ("1.0~rc1", "1.0"),
        ("9.9", "1:0.1"),
    ],
)
def test_lockstep_compare_versions_orders_like_dpkg(lower, higher):
    assert lockstep.compare_versions(lower, higher) == -1
    assert lockstep.compare_versions(higher, lower) == 1
    assert lockstep.compare_versions(lower, lower) == 0


# ----------------------------------------------------------------------------------------------------- parsers
def test_lockstep_parse_dpkg_query_reads_hold_state_and_config_files():
    parsed = packages("dpkg_covered_6.17.0-1014.txt")
    image = parsed["linux-image-6.17.0-1014-nvidia"]
    assert image["version"] == "6.17.0-1014.14"
    assert image["held"] and image["on_disk"]
    removed = parsed["linux-modules-nvidia-580-open-6.11.0-1016-nvidia"]
    assert not removed["on_disk"]
    assert removed["state"] == "config-files"
    forgotten = parsed["nvidia-driver-570-server"]
    assert forgotten["version"] == "" and not forgotten["on_disk"]
    assert not parsed["linux-image-6.11.0-1016-nvidia"]["held"]


def test_lockstep_parse_dpkg_query_drops_architecture_qualifier():
    parsed = lockstep.parse_dpkg_query("libc6:arm64 2.39-0ubuntu8.4 install ok installed\n")
    assert "libc6" in parsed


def test_lockstep_parse_lib_modules():
    assert lockstep.parse_lib_modules(fixture("ls_lib_modules.txt") + "README\n") == [
        "6.11.0-1016-nvidia",
        "6.17.0-1014-nvidia",
        "6.17.0-1018-nvidia",
    ]


def test_lockstep_modules_metapackage_depends_give_the_target_kernel():
    depends = fixture("depends_modules_meta_6.17.0-1014.txt")
    parsed = lockstep.parse_depends(depends)
    assert parsed[0] == {
        "name": "linux-modules-nvidia-580-open-6.17.0-1014-nvidia",
        "op": "=",
        "version": "6.17.0-1014.14+1",
    }
    assert parsed[1]["name"] == "nvidia-kernel-common-580"
    assert lockstep.modules_target_release(depends, "580", "open") == "6.17.0-1014-nvidia"
    # Another branch's modules are not this branch's target.
    assert lockstep.modules_target_release(depends, "590", "open") is None
    assert lockstep.image_target_release(fixture("depends_image_meta_6.17.0-1018.txt")) == "6.17.0-1018-nvidia"


def test_lockstep_package_names():
    assert lockstep.modules_package_name("580", "open", "6.17.0-1018-nvidia") == (
        "linux-modules-nvidia-580-open-6.17.0-1018-nvidia"
    )
    assert lockstep.modules_metapackage_name("580", "open", "nvidia-hwe-24.04") == (
        "linux-modules-nvidia-580-open-nvidia-hwe-24.04"
    )
    assert (
        lockstep.modules_package_name("580", "", "6.17.0-1014-nvidia") == "linux-modules-nvidia-580-6.17.0-1014-nvidia"
    )
    assert lockstep.split_release("6.17.0-1014-nvidia-64k") == ("6.17.0-1014", "nvidia-64k")
    assert lockstep.split_release("nvidia-hwe-24.04") == (None, None)


# ----------------------------------------------------------------------------------------------------- kernels
def test_lockstep_installed_kernels_skip_metapackages_and_removed_images():
    text = (
        fixture("dpkg_covered_6.17.0-1014.txt") + "linux-image-6.8.0-40-nvidia 6.8.0-40.40 deinstall ok config-files\n"
    )
    assert lockstep.installed_kernels(lockstep.parse_dpkg_query(text)) == {
        "6.11.0-1016-nvidia": "6.11.0-1016.16",
        "6.17.0-1014-nvidia": "6.17.0-1014.14",
    }


def test_lockstep_next_boot_is_the_highest_installed_kernel_by_dpkg_order():
    kernels = {"6.17.0-1032-nvidia": "6.17.0-1032.32", "7.0.0-1019-nvidia": "7.0.0-1019.19~24.04.2"}
    assert lockstep.next_boot_kernel(kernels) == "7.0.0-1019-nvidia"
    # dpkg compares the ABI numbers as numbers: 1014 > 999, although "1014" < "999" as strings.
    kernels = {"6.17.0-1014-nvidia": "6.17.0-1014.14", "6.17.0-999-nvidia": "6.17.0-999.1"}
    assert lockstep.next_boot_kernel(kernels) == "6.17.0-1014-nvidia"
    assert lockstep.next_boot_kernel({}) is None


@pytest.mark.parametrize(
    "path",
    [
        "kernel/nvidia-580-open/nvidia.ko",
        "kernel/nvidia-580-open/nvidia.ko.zst",
        "kernel/nvidia-580/nvidia.ko.xz",
        "updates/dkms/nvidia.ko.zst",
        "updates/dkms/nvidia.ko",
        "extra/nvidia.ko.gz",
    ],
)
def test_lockstep_nvidia_module_found_with_any_compression_and_location(path):
    assert lockstep.nvidia_module_paths([path, "kernel/drivers/gpu/drm/nouveau/nouveau.ko.zst"]) == [path]


@pytest.mark.parametrize(
    "path",
    [
        "kernel/nvidia-580-open/nvidia-uvm.ko",
        "kernel/nvidia-580-open/nvidia.ko.orig",
        "kernel/drivers/video/nvidia.ko",
        "nvidia.ko",
    ],
)
def test_lockstep_nvidia_module_not_matched(path):
    assert lockstep.nvidia_module_paths([path]) == []


# ----------------------------------------------------------------------------------------------------- verdict
def test_lockstep_covered_when_running_kernel_is_the_next_boot_and_has_nvidia_ko():
    state = lockstep.lockstep_verdict(
        "6.17.0-1014-nvidia",
        packages("dpkg_covered_6.17.0-1014.txt"),
        {"6.17.0-1014-nvidia": PREBUILT, "6.11.0-1016-nvidia": []},
        modules_meta_depends=fixture("depends_modules_meta_6.17.0-1014.txt"),
        image_meta_depends=fixture("depends_image_meta_6.17.0-1014.txt"),
        node="spark-1",
    )
    assert state["verdict"] == "covered"
    assert state["ok"]
    assert state["running_abi"] == "6.17.0-1014"
    assert state["next_boot_kernel"] == "6.17.0-1014-nvidia"
    assert state["modules_meta_target"] == state["image_meta_target"] == "6.17.0-1014-nvidia"
    assert state["covered_kernels"] == ["6.17.0-1014-nvidia"]
    assert state["missing_package"] is None
    assert state["warnings"] == []


def test_pitfall_phased_update_gap_new_kernel_without_modules_is_exposed_before_the_reboot():
    """apt upgrade took the kernel metapackage to 1018; phasing held the modules metapackage at 1014."""
    state = lockstep.lockstep_verdict(
        "6.17.0-1014-nvidia",
        packages("dpkg_phased_gap_6.17.0-1018.txt"),
        {"6.17.0-1014-nvidia": PREBUILT, "6.17.0-1018-nvidia": []},
        modules_meta_depends=fixture("depends_modules_meta_6.17.0-1014.txt"),
        image_meta_depends=fixture("depends_image_meta_6.17.0-1018.txt"),
        node="spark-2",
    )
    # The GPU still works right now, and that is exactly why a running-kernel-only check misses it.
    assert state["running_covered"]
    assert state["verdict"] == "exposed"
    assert not state["ok"]
    assert not state["next_boot_covered"]
    assert state["next_boot_kernel"] == "6.17.0-1018-nvidia"
    assert state["missing_package"] == "linux-modules-nvidia-580-open-6.17.0-1018-nvidia"
    assert "spark-2" in state["message"]
    assert "linux-modules-nvidia-580-open-6.17.0-1018-nvidia" in state["message"]
    assert "do not reboot" in state["message"]
    assert any("out of step" in warning for warning in state["warnings"])


def test_pitfall_phased_update_gap_after_the_reboot_is_exposed():
    state = lockstep.lockstep_verdict(
        "6.17.0-1018-nvidia",
        packages("dpkg_phased_gap_6.17.0-1018.txt"),
        {"6.17.0-1014-nvidia": PREBUILT, "6.17.0-1018-nvidia": []},
        modules_meta_depends=fixture("depends_modules_meta_6.17.0-1014.txt"),
        image_meta_depends=fixture("depends_image_meta_6.17.0-1018.txt"),
    )
    assert state["verdict"] == "exposed"
    assert not state["running_covered"]
    assert "the running kernel and the next boot" in state["message"]


def test_pitfall_pinpoint_kernel_ahead_of_metapackages_is_exposed():
    """Seed 004: both metapackages agreed on 6.17.0-1032 while a pinpoint 7.0.0-1019 kernel ran."""
    dpkg = packages("dpkg_pinpoint_7.0.0-1019.txt")
    modules_depends = fixture("depends_modules_meta_6.17.0-1032.txt")
    image_depends = fixture("depends_image_meta_6.17.0-1032.txt")
    # The check that lied: the two metapackages agree with each other.
    assert lockstep.modules_target_release(modules_depends, "580", "open") == lockstep.image_target_release(
        image_depends
    )
    state = lockstep.lockstep_verdict(
        "7.0.0-1019-nvidia",
        dpkg,
        {"6.17.0-1032-nvidia": PREBUILT, "7.0.0-1019-nvidia": []},
        modules_meta_depends=modules_depends,
        image_meta_depends=image_depends,
        node="spark-1",
    )
    assert state["verdict"] == "exposed"
    assert state["running_abi"] == "7.0.0-1019"
    assert state["modules_meta_target"] == "6.17.0-1032-nvidia"
    assert state["missing_package"] == "linux-modules-nvidia-580-open-7.0.0-1019-nvidia"
    assert any("ahead of" in warning and "7.0.0-1019-nvidia" in warning for warning in state["warnings"])


def test_pitfall_pinpoint_kernel_ahead_of_metapackages_is_exposed_before_it_is_booted():
    """Installed but not booted yet: the running kernel is fine, the next boot would take the pinpoint kernel."""
    state = lockstep.lockstep_verdict(
        "6.17.0-1032-nvidia",
        packages("dpkg_pinpoint_7.0.0-1019.txt"),
        {"6.17.0-1032-nvidia": PREBUILT, "7.0.0-1019-nvidia": []},
        modules_meta_depends=fixture("depends_modules_meta_6.17.0-1032.txt"),
        image_meta_depends=fixture("depends_image_meta_6.17.0-1032.txt"),
    )
    assert state["running_covered"]
    assert state["verdict"] == "exposed"
    assert state["next_boot_kernel"] == "7.0.0-1019-nvidia"
    assert any("next-boot kernel 7.0.0-1019-nvidia is ahead of" in warning for warning in state["warnings"])


def test_pending_reboot_is_a_warning_not_a_failure():
    """Both metapackages and the 1018 modules are in; the node still runs 1014 (direction-aware: no wolf cried)."""
    state = lockstep.lockstep_verdict(
        "6.17.0-1014-nvidia",
        packages("dpkg_upgraded_not_rebooted_6.17.0-1018.txt"),
        {"6.17.0-1014-nvidia": PREBUILT, "6.17.0-1018-nvidia": ["kernel/nvidia-580-open/nvidia.ko.zst"]},
        modules_meta_depends=fixture("depends_modules_meta_6.17.0-1018.txt"),
        image_meta_depends=fixture("depends_image_meta_6.17.0-1018.txt"),
        node="spark-1",
    )
    assert state["verdict"] == "pending-reboot"
    assert state["ok"]
    assert state["next_boot_covered"]
    assert state["missing_package"] is None
    assert "reboot" in state["message"]
    # Running behind the target is the normal pre-reboot state: no warning beyond the verdict itself.
    assert state["warnings"] == []


def test_pending_reboot_is_a_warning_even_when_the_old_kernels_modules_were_removed():
    state = lockstep.lockstep_verdict(
        "6.17.0-1014-nvidia",
        packages("dpkg_upgraded_not_rebooted_6.17.0-1018.txt"),
        {"6.17.0-1014-nvidia": [], "6.17.0-1018-nvidia": ["kernel/nvidia-580-open/nvidia.ko.zst"]},
        modules_meta_depends=fixture("depends_modules_meta_6.17.0-1018.txt"),
        image_meta_depends=fixture("depends_image_meta_6.17.0-1018.txt"),
    )
    assert state["verdict"] == "pending-reboot"
    assert "holds no nvidia.ko (removed, or never there)" in state["message"]


def test_lockstep_no_metapackages_installed_still_judges_kernels():
    state = lockstep.lockstep_verdict(
        "6.17.0-1014-nvidia",
        lockstep.parse_dpkg_query("linux-image-6.17.0-1014-nvidia 6.17.0-1014.14 install ok installed\n"),
        {"6.17.0-1014-nvidia": []},
    )
    assert state["verdict"] == "exposed"
    assert state["modules_meta_target"] is None
    assert "nothing (not installed)" in state["message"]


# ------------------------------------------------------------------------------------------- apt failure message
# Issue 19 item 8 (a failure between install and hold): the operator's message must name what failed. Captured:
# dpkg's error is on apt-get's stdout, behind the transcript; stderr holds only apt's E: line.
APT_STDOUT = fixture("apt_install_postinst_fails.stdout")
APT_STDERR = fixture("apt_install_postinst_fails.stderr")
# Two sources with one version at other hashes (a node image's repository beside another build of it): apt adds a
# W: line per package, after dpkg's run (seen in make test's nvidia_lockstep scenario, 2026-12-01).
DISAGREE = "".join(
    f"W: Sources disagree on hashes for supposedly identical version '6.17.0-1015.15' of '{name}:amd64'.\n"
    for name in ("linux-nvidia-hwe-24.04", "linux-image-nvidia-hwe-24.04", "linux-headers-nvidia-hwe-24.04") * 4
)


def test_pitfall_failed_install_message_names_the_failing_package():
    text = lockstep.apt_failure_text(APT_STDOUT, APT_STDERR)
    assert text.startswith("dpkg: error processing package gb10-sim-postinst-fails (--configure):")
    assert "post-installation script subprocess returned error exit status 1" in text
    assert text.endswith("E: Sub-process /usr/bin/dpkg returned an error code (1)")
    assert "Unpacking" not in text and "debconf" not in text


def test_pitfall_failed_install_message_survives_apt_warnings():
    plain_tail = (APT_STDERR + DISAGREE)[-800:]
    assert "gb10-sim-postinst-fails" not in plain_tail  # what the role's message held before
    text = lockstep.apt_failure_text(APT_STDOUT, APT_STDERR + DISAGREE)
    assert "Errors were encountered while processing:\n gb10-sim-postinst-fails" in text
    assert "W: " not in text


def test_apt_failure_before_dpkg_ran_is_apt_stderr_else_msg():
    refused = "E: Version '9.9' for 'nvidia-driver-580-open' was not found\n"
    assert lockstep.apt_failure_text("Reading package lists...\n", DISAGREE + refused) == refused.strip()
    assert lockstep.apt_failure_text(None, None, "no package matching") == "no package matching"
    assert len(lockstep.apt_failure_text(APT_STDOUT, APT_STDERR, limit=50)) == 50


def test_pitfall_rollback_to_an_older_set_is_seen_as_a_move():
    """Found by the driver-change rolling upgrade back to set A: under set C's 1001 pins the apt module's check mode
    answered "no available installation candidate" and the node was taken as already on its set."""
    moves = lockstep.simulated_moves(fixture("apt_simulate_back_under_newer_pins.stdout"))
    by_name = {move["package"]: move for move in moves}
    assert len(moves) == 7
    assert by_name["nvidia-driver-580-open"] == {
        "package": "nvidia-driver-580-open",
        "action": "install",
        "installed": "580.150-0ubuntu0.24.04.1",
        "target": "580.142-0ubuntu0.24.04.1",
    }
    assert by_name["linux-nvidia-hwe-24.04"]["installed"] is None
    assert by_name["linux-nvidia-hwe-24.04"]["target"] == "6.17.0-1014.14"


def test_set_in_place_moves_nothing():
    assert lockstep.simulated_moves(fixture("apt_simulate_unchanged.stdout")) == []
    assert lockstep.simulated_moves("") == []


def test_removal_is_a_move():
    line = "Remv linux-image-6.17.0-1015-nvidia [6.17.0-1015.15]"
    assert lockstep.simulated_moves(line) == [
        {"package": "linux-image-6.17.0-1015-nvidia", "action": "remove", "installed": "6.17.0-1015.15", "target": None}
    ]


def test_pitfall_unpublished_version_is_named_in_the_refusal():
    result = {
        "rc": 100,
        "stdout": fixture("apt_simulate_unpublished.stdout"),
        "stderr": fixture("apt_simulate_unpublished.stderr"),
    }
    text = lockstep.apt_failure_text(result["stdout"], result["stderr"])
    assert text == "E: Version '580.999-0ubuntu0.24.04.1' for 'nvidia-driver-580-open' was not found"
    assert lockstep.simulated_moves(result["stdout"]) == []


def test_hold_changes_names_each_package_to_mark_once_and_the_unknown_ones():
    packages = lockstep.parse_dpkg_query(
        "a 1.0 install ok installed\nb 1.0 hold ok installed\nc 1.0 deinstall ok config-files\n"
    )
    assert lockstep.hold_changes(packages, ["a", "b", "a", "c", "d"]) == (["c", "d"], [("a", "install", "hold")])
    assert lockstep.hold_changes(packages, ["a", "b"], held=False) == ([], [("b", "hold", "install")])
