# Copyright: gb10.serving maintainers
# Apache-2.0
"""The hub's listing as the manifest the fetch records (plugins/module_utils/_weights/manifest.py)."""

from __future__ import annotations

from _weights_fixtures import SHARDS

from ansible_collections.gb10.serving.plugins.module_utils._weights.manifest import (
    expected_digests,
    manifest_from_tree,
    repo_folder,
)


def test_manifest_keeps_the_lfs_sha256_and_the_git_oid_of_other_files():
    entries = [
        {"type": "file", "path": "config.json", "size": 10, "oid": "gitoid"},
        {"type": "file", "path": SHARDS[0], "size": 1000, "oid": "ptr", "lfs": {"oid": "sha", "size": 1000}},
        {"type": "directory", "path": "sub", "oid": "tree"},
    ]
    assert manifest_from_tree(entries) == {
        "config.json": {"size": 10, "blob": "gitoid", "git_oid": "gitoid"},
        SHARDS[0]: {"size": 1000, "blob": "sha", "sha256": "sha"},
    }


def test_a_manifest_of_sizes_and_blob_names_still_proves_content():
    # Manifests recorded before the digests: the blob name is the hub's ETag, a sha256 for LFS, a git sha1 else.
    assert expected_digests({"size": 1, "blob": "a" * 64}) == {"sha256": "a" * 64}
    assert expected_digests({"size": 1, "blob": "b" * 40}) == {"git_sha1": "b" * 40}
    assert expected_digests({"size": 1, "blob": "neither"}) == {}


def test_repo_folder_matches_the_plans_snapshot_dir():
    from ansible_collections.gb10.serving.plugins.module_utils import _plan

    folder = repo_folder("gb10-sim/tiny-moe")
    assert _plan.snapshot_dir("gb10-sim/tiny-moe", "r").startswith(f"hub/{folder}/snapshots/")
