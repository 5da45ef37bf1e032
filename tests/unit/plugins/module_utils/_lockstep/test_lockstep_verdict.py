# Copyright: gb10.serving maintainers
# Apache-2.0
"""Kernel / NVIDIA module lockstep verdict (seed 004 pitfall 3, _lockstep/verdict.py), on real-shaped dpkg output."""

from __future__ import annotations

from _lockstep_fixtures import PREBUILT, fixture, packages

from ansible_collections.gb10.serving.plugins.module_utils._lockstep.kernels import (
    image_target_release,
    modules_target_release,
)
from ansible_collections.gb10.serving.plugins.module_utils._lockstep.parse import parse_dpkg_query
from ansible_collections.gb10.serving.plugins.module_utils._lockstep.verdict import lockstep_verdict


def test_lockstep_covered_when_running_kernel_is_the_next_boot_and_has_nvidia_ko():
    state = lockstep_verdict(
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
    state = lockstep_verdict(
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
    state = lockstep_verdict(
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
    assert modules_target_release(modules_depends, "580", "open") == image_target_release(image_depends)
    state = lockstep_verdict(
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
    state = lockstep_verdict(
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
    state = lockstep_verdict(
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
    state = lockstep_verdict(
        "6.17.0-1014-nvidia",
        packages("dpkg_upgraded_not_rebooted_6.17.0-1018.txt"),
        {"6.17.0-1014-nvidia": [], "6.17.0-1018-nvidia": ["kernel/nvidia-580-open/nvidia.ko.zst"]},
        modules_meta_depends=fixture("depends_modules_meta_6.17.0-1018.txt"),
        image_meta_depends=fixture("depends_image_meta_6.17.0-1018.txt"),
    )
    assert state["verdict"] == "pending-reboot"
    assert "holds no nvidia.ko (removed, or never there)" in state["message"]


def test_lockstep_no_metapackages_installed_still_judges_kernels():
    state = lockstep_verdict(
        "6.17.0-1014-nvidia",
        parse_dpkg_query("linux-image-6.17.0-1014-nvidia 6.17.0-1014.14 install ok installed\n"),
        {"6.17.0-1014-nvidia": []},
    )
    assert state["verdict"] == "exposed"
    assert state["modules_meta_target"] is None
    assert "nothing (not installed)" in state["message"]
