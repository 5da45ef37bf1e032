# Copyright: gb10.serving maintainers
# Apache-2.0
"""Which module, where (plugins/module_utils/_flashinfer_jit/cache_layout.py)."""

from __future__ import annotations

import pytest

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.cache_layout import (
    arch_dir,
    cache_paths,
    moe_module_name,
)
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.errors import FlashinferJitError


@pytest.mark.parametrize(
    ("capability", "arch", "module"),
    [
        ("12.1", "121a", "fused_moe_120"),
        ("sm121", "121a", "fused_moe_120"),
        ("12.0", "120f", "fused_moe_120"),
        ("9.0", "90a", "fused_moe_90"),
        ("10.0", "100a", "fused_moe_100"),
        ("10.3", "103a", "fused_moe_103"),
        ("8.9", "89", "fused_moe_89"),
    ],
)
def test_arch_folder_and_module_follow_flashinfer(capability, arch, module):
    assert arch_dir(capability) == arch
    assert moe_module_name(capability) == module


def test_no_cutlass_moe_module_for_older_gpus():
    with pytest.raises(FlashinferJitError, match="sm75"):
        moe_module_name("7.5")
    with pytest.raises(FlashinferJitError):
        arch_dir("hopper")


def test_cache_layout_is_the_one_measured_on_h200():
    """The path flashinfer 0.6.18 wrote on the H200 run, FLASHINFER_WORKSPACE_BASE=/var/tmp/gb10/ws."""
    paths = cache_paths("/var/tmp/gb10/ws/", "0.6.18", "9.0")
    assert paths["library"] == "/var/tmp/gb10/ws/.cache/flashinfer/0.6.18/90a/cached_ops/fused_moe_90/fused_moe_90.so"
    assert paths["stamp"].endswith("/fused_moe_90/gb10-prebuild.json")


def test_cache_layout_gb10_host_and_container_differ_only_in_base():
    host = cache_paths("/var/lib/gb10/flashinfer-cache", "0.6.18", "12.1")
    container = cache_paths("/root/.cache/flashinfer-workspace", "0.6.18", "12.1")
    suffix = "/.cache/flashinfer/0.6.18/121a/cached_ops/fused_moe_120/fused_moe_120.so"
    assert host["library"] == "/var/lib/gb10/flashinfer-cache" + suffix
    assert container["library"] == "/root/.cache/flashinfer-workspace" + suffix
