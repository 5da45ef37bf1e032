# Copyright: gb10.serving maintainers
# Apache-2.0
"""Kernels on the node (_lockstep/kernels.py): installed, next boot, the metapackages' targets, nvidia.ko."""

from __future__ import annotations

import pytest
from _lockstep_fixtures import fixture

from ansible_collections.gb10.serving.plugins.module_utils._lockstep.kernels import (
    image_target_release,
    installed_kernels,
    modules_target_release,
    next_boot_kernel,
    nvidia_module_paths,
)
from ansible_collections.gb10.serving.plugins.module_utils._lockstep.parse import parse_depends, parse_dpkg_query


def test_lockstep_modules_metapackage_depends_give_the_target_kernel():
    depends = fixture("depends_modules_meta_6.17.0-1014.txt")
    parsed = parse_depends(depends)
    assert parsed[0] == {
        "name": "linux-modules-nvidia-580-open-6.17.0-1014-nvidia",
        "op": "=",
        "version": "6.17.0-1014.14+1",
    }
    assert parsed[1]["name"] == "nvidia-kernel-common-580"
    assert modules_target_release(depends, "580", "open") == "6.17.0-1014-nvidia"
    # Another branch's modules are not this branch's target.
    assert modules_target_release(depends, "590", "open") is None
    assert image_target_release(fixture("depends_image_meta_6.17.0-1018.txt")) == "6.17.0-1018-nvidia"


def test_lockstep_installed_kernels_skip_metapackages_and_removed_images():
    text = (
        fixture("dpkg_covered_6.17.0-1014.txt") + "linux-image-6.8.0-40-nvidia 6.8.0-40.40 deinstall ok config-files\n"
    )
    assert installed_kernels(parse_dpkg_query(text)) == {
        "6.11.0-1016-nvidia": "6.11.0-1016.16",
        "6.17.0-1014-nvidia": "6.17.0-1014.14",
    }


def test_lockstep_next_boot_is_the_highest_installed_kernel_by_dpkg_order():
    kernels = {"6.17.0-1032-nvidia": "6.17.0-1032.32", "7.0.0-1019-nvidia": "7.0.0-1019.19~24.04.2"}
    assert next_boot_kernel(kernels) == "7.0.0-1019-nvidia"
    # dpkg compares the ABI numbers as numbers: 1014 > 999, although "1014" < "999" as strings.
    kernels = {"6.17.0-1014-nvidia": "6.17.0-1014.14", "6.17.0-999-nvidia": "6.17.0-999.1"}
    assert next_boot_kernel(kernels) == "6.17.0-1014-nvidia"
    assert next_boot_kernel({}) is None


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
    assert nvidia_module_paths([path, "kernel/drivers/gpu/drm/nouveau/nouveau.ko.zst"]) == [path]


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
    assert nvidia_module_paths([path]) == []
