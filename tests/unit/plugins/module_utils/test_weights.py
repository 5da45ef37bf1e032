"""The completeness rules of plugins/module_utils/_weights.py (seed 004 pitfalls 5 and 6)."""

import json

from ansible_collections.gb10.serving.plugins.module_utils import _weights

SNAP = "/var/lib/gb10/hf-cache/hub/models--org--m/snapshots/" + "a" * 40
SHARDS = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
INDEX = json.dumps({"metadata": {"total_size": 3}, "weight_map": {"a": SHARDS[0], "b": SHARDS[1], "c": SHARDS[1]}})
MANIFEST = {
    "config.json": {"size": 10, "blob": "c1"},
    "model.safetensors.index.json": {"size": len(INDEX), "blob": "i1"},
    SHARDS[0]: {"size": 1000, "blob": "s1"},
    SHARDS[1]: {"size": 2000, "blob": "s2"},
}


def observed(**overrides):
    files = {path: entry["size"] for path, entry in MANIFEST.items()}
    files.update(overrides)
    return {k: v for k, v in files.items() if v is not None}


def test_complete_snapshot_passes():
    result = _weights.check_snapshot("spark-1", SNAP, observed(), INDEX, MANIFEST, [])
    assert result["complete"], result["msg"]
    assert result["msg"] == f"spark-1: {SNAP} complete (4 files checked)"


def test_pitfall_no_shared_filesystem_missing_shard_names_node_and_shard():
    result = _weights.check_snapshot("spark-2", SNAP, observed(**{SHARDS[1]: None}), INDEX, MANIFEST, [])
    assert not result["complete"]
    assert result["missing"] == [SHARDS[1]]
    assert result["msg"].startswith(f"spark-2: missing from {SNAP}: {SHARDS[1]}")
    assert "run the model_weights role again" in result["msg"]


def test_shard_with_a_size_other_than_the_hubs_fails_with_both_sizes():
    result = _weights.check_snapshot("spark-2", SNAP, observed(**{SHARDS[0]: 999}), INDEX, MANIFEST, [])
    assert not result["complete"]
    assert result["wrong_size"] == [f"{SHARDS[0]} (999 bytes, the hub reported 1000)"]


def test_partial_download_fails_even_with_every_file_present():
    partial = "/cache/hub/models--org--m/blobs/s2.incomplete"
    result = _weights.check_snapshot("spark-1", SNAP, observed(), INDEX, MANIFEST, [partial])
    assert not result["complete"]
    assert partial in result["msg"]


def test_missing_config_and_index_are_named():
    files = observed(**{"config.json": None, "model.safetensors.index.json": None})
    result = _weights.check_snapshot("spark-1", SNAP, files, None, MANIFEST, [])
    assert result["missing"] == ["config.json", "model.safetensors.index.json"]


def test_no_snapshot_folder_says_never_fetched():
    result = _weights.check_snapshot("spark-2", SNAP, None, None, None, [])
    assert not result["complete"]
    assert "the model was never fetched here" in result["msg"]


def test_without_a_manifest_sizes_cannot_be_trusted():
    result = _weights.check_snapshot("spark-1", SNAP, observed(), INDEX, None, [])
    assert not result["complete"]
    assert "no hub manifest" in result["msg"]


def test_unreadable_index_is_a_problem():
    result = _weights.check_snapshot("spark-1", SNAP, observed(), "{not json", MANIFEST, [])
    assert not result["complete"]
    assert "is not a safetensors index" in result["msg"]


def test_manifest_names_lfs_blobs_by_sha256_and_others_by_git_oid():
    entries = [
        {"type": "file", "path": "config.json", "size": 10, "oid": "gitoid"},
        {"type": "file", "path": SHARDS[0], "size": 1000, "oid": "ptr", "lfs": {"oid": "sha", "size": 1000}},
        {"type": "directory", "path": "sub", "oid": "tree"},
    ]
    assert _weights.manifest_from_tree(entries) == {
        "config.json": {"size": 10, "blob": "gitoid"},
        SHARDS[0]: {"size": 1000, "blob": "sha"},
    }


def test_fingerprint_is_order_free_and_size_sensitive():
    a = _weights.fingerprint({"x": 1, "y": 2})
    assert a == _weights.fingerprint({"y": 2, "x": 1})
    assert a != _weights.fingerprint({"x": 1, "y": 3})


def test_repo_folder_matches_the_plans_snapshot_dir():
    from ansible_collections.gb10.serving.plugins.module_utils import _plan

    folder = _weights.repo_folder("gb10-sim/tiny-moe")
    assert _plan.snapshot_dir("gb10-sim/tiny-moe", "r").startswith(f"hub/{folder}/snapshots/")
