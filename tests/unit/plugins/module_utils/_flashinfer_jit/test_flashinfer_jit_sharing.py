# Copyright: gb10.serving maintainers
# Apache-2.0
"""Built once per cluster, issue 17 (plugins/module_utils/_flashinfer_jit/sharing.py)."""

from __future__ import annotations

import json

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.cache_layout import STAMP_NAME
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.sharing import (
    ninja_input_dirs,
    share_key,
    share_manifest,
    share_roles,
)

_KEY_A = share_key("r@sha256:" + "a" * 64, "0.6.18", "12.1", "/root/.cache/flashinfer-workspace", {"CC": "gcc"})

_KEY_B = share_key("r@sha256:" + "b" * 64, "0.6.18", "12.1", "/root/.cache/flashinfer-workspace", {"CC": "gcc"})


def test_share_key_holds_what_reaches_build_ninja_and_nothing_else():
    env = {"CC": "gcc", "FLASHINFER_EXTRA_CUDAFLAGS": "-x", "VLLM_HOST_IP": "10.0.0.1", "MAX_JOBS": "4"}
    key = json.loads(share_key("r@sha256:" + "a" * 64, "0.6.18", "12.1", "/w/", env))
    assert key["env"] == {"CC": "gcc", "FLASHINFER_EXTRA_CUDAFLAGS": "-x"}
    assert (key["arch"], key["workspace_base"]) == ("121a", "/w")
    other_node = dict(env, VLLM_HOST_IP="10.0.0.2", MAX_JOBS="9")
    assert share_key("r@sha256:" + "a" * 64, "0.6.18", "12.1", "/w", other_node) == json.dumps(
        key, sort_keys=True, separators=(",", ":")
    )
    assert share_key("r@sha256:" + "a" * 64, "0.6.18", "12.1", "/w", dict(env, CC="clang")) != json.dumps(
        key, sort_keys=True, separators=(",", ":")
    )


def test_share_roles_first_due_node_builds_the_others_receive_from_it():
    nodes = [{"name": f"spark-{i}", "key": _KEY_A, "has": False, "due": True} for i in (1, 2, 3)]
    roles = share_roles(nodes)
    assert roles["spark-1"]["action"] == "build"
    assert [roles[n]["source"] for n in ("spark-2", "spark-3")] == ["spark-1", "spark-1"]


def test_share_roles_a_node_with_a_valid_stamp_gives_it_and_nobody_builds():
    nodes = [
        {"name": "spark-1", "key": _KEY_A, "has": False, "due": True},
        {"name": "spark-2", "key": _KEY_A, "has": True, "due": False},
    ]
    assert share_roles(nodes)["spark-1"] == {"action": "receive", "source": "spark-2", "key": _KEY_A}


def test_share_roles_another_digest_or_arch_builds_its_own():
    other_arch = share_key("r@sha256:" + "a" * 64, "0.6.18", "9.0", "/root/.cache/flashinfer-workspace", {})
    nodes = [
        {"name": "spark-1", "key": _KEY_A, "has": False, "due": True},
        {"name": "spark-2", "key": _KEY_B, "has": False, "due": True},
        {"name": "h200-1", "key": other_arch, "has": False, "due": True},
    ]
    assert {name: role["action"] for name, role in share_roles(nodes).items()} == {
        "spark-1": "build",
        "spark-2": "build",
        "h200-1": "build",
    }


def test_share_roles_rolling_upgrade_builds_once_on_the_first_drained_node():
    """serial: 1. Batch 1: spark-1 alone is due for the new image (the others hold the old one) and builds. Batch 2:
    spark-1's record now holds the new key; spark-2 receives from it (spark-1 serves meanwhile)."""
    batch1 = [
        {"name": "spark-1", "key": _KEY_B, "has": False, "due": True},
    ]
    assert share_roles(batch1)["spark-1"]["action"] == "build"
    batch2 = [
        {"name": "spark-1", "key": _KEY_B, "has": True, "due": False},
        {"name": "spark-2", "key": _KEY_B, "has": False, "due": True},
    ]
    assert share_roles(batch2)["spark-2"] == {"action": "receive", "source": "spark-1", "key": _KEY_B}


_NINJA = """ninja_required_version = 1.3
rule cuda_compile
  command = $nvcc -MMD -MF $out.d -c $in -o $out
  depfile = $out.d
  deps = gcc

build /w/c/121a/cached_ops/fused_moe_120/a.cuda.o: cuda_compile $
    /w/c/121a/generated/cutlass_instantiations/120/a.c
build /w/c/121a/cached_ops/fused_moe_120/b.cuda.o: cuda_compile /usr/lib/python3/flashinfer/csrc/b.cu
build /w/c/121a/cached_ops/fused_moe_120/fused_moe_120.so: link /w/c/121a/cached_ops/fused_moe_120/a.cuda.o
"""


def test_ninja_input_dirs_are_the_generated_sources_in_the_cache():
    assert ninja_input_dirs(_NINJA, "/w/c/121a") == [
        "cached_ops/fused_moe_120",
        "generated/cutlass_instantiations/120",
    ]


def _files(**over):
    build = "cached_ops/fused_moe_120"
    files = {
        f"{build}/fused_moe_120.so": {"size": 3, "sha256": "s" * 64, "mtime_ns": 2},
        f"{build}/build.ninja": {"size": 3, "sha256": "n" * 64, "mtime_ns": 1},
        f"{build}/.ninja_log": {"size": 3, "sha256": "l" * 64, "mtime_ns": 2},
        f"{build}/.ninja_deps": {"size": 3, "sha256": "d" * 64, "mtime_ns": 2},
        f"{build}/{STAMP_NAME}": {"size": 3, "sha256": "t" * 64, "mtime_ns": 3},
        f"{build}/{STAMP_NAME}.tmp": {"size": 3, "sha256": "t" * 64, "mtime_ns": 3},
    }
    files.update(over)
    return {k: v for k, v in files.items() if v is not None}


_STAMP = {"library_sha256": "s" * 64, "ninja_sha256": "n" * 64}


def test_share_manifest_sends_the_module_and_leaves_partial_files_out():
    manifest, problems = share_manifest("spark-1", _files(), _STAMP, "fused_moe_120", _NINJA)
    assert problems == []
    assert f"cached_ops/fused_moe_120/{STAMP_NAME}.tmp" not in manifest
    assert len(manifest) == 5


def test_pitfall_rebuild_at_profiling_manifest_without_ninja_deps_is_refused():
    """Without .ninja_deps ninja counts every deps=gcc unit dirty: the receiver's serving start would rebuild the
    module at KV-cache profiling, beside the weights (seed 004, the CUTLASS saga)."""
    _manifest, problems = share_manifest(
        "spark-1", _files(**{"cached_ops/fused_moe_120/.ninja_deps": None}), _STAMP, "fused_moe_120", _NINJA
    )
    assert any(".ninja_deps is missing" in p and p.startswith("spark-1: ") for p in problems)


def test_pitfall_rebuild_at_profiling_manifest_refuses_a_library_that_is_not_the_stamped_one():
    wrong = {"cached_ops/fused_moe_120/fused_moe_120.so": {"size": 3, "sha256": "x" * 64, "mtime_ns": 2}}
    _manifest, problems = share_manifest("spark-1", _files(**wrong), _STAMP, "fused_moe_120", _NINJA)
    assert any("fused_moe_120.so sha256 xxxxxxxxxxxx differs from the stamp's ssssssssssss" in p for p in problems)
    assert problems[-1].startswith("spark-1 cannot give its fused_moe_120 to another node")
