# Copyright: gb10.serving maintainers
# Apache-2.0
"""The completeness rules of plugins/module_utils/_weights/snapshot.py (seed 004 pitfalls 5 and 6), by content."""

from __future__ import annotations

from _weights_fixtures import CONTENT, MANIFEST, SHARDS, SNAP, check, entry, observed, sha256

from ansible_collections.gb10.serving.plugins.module_utils._weights.snapshot import check_snapshot, removal_targets


def test_complete_snapshot_passes():
    result = check(observed())
    assert result["complete"], result["msg"]
    assert result["msg"] == f"spark-2: {SNAP} complete (4 files proven)"


def test_pitfall_no_shared_filesystem_missing_shard_names_node_and_shard():
    result = check(observed(**{SHARDS[1]: None}))
    assert not result["complete"]
    assert result["missing"] == [SHARDS[1]]
    assert result["msg"].startswith(f"spark-2: missing from {SNAP}: {SHARDS[1]}")
    assert "run the model_weights role again" in result["msg"]


def test_pitfall_wrong_shard_of_the_same_size_is_refused_naming_node_and_file():
    # The trial of issue 19: 14 bytes overwritten at offset 4096 of an LFS blob, same size; sizes alone passed it.
    corrupt = bytearray(CONTENT[SHARDS[1]])
    corrupt[100:114] = b"\0" * 14
    result = check(observed(**{SHARDS[1]: bytes(corrupt)}))
    assert not result["complete"]
    assert result["wrong_content"] == [SHARDS[1]] and result["bad"] == [SHARDS[1]]
    assert (
        f"spark-2: content differs from the hub's in {SNAP} (removed): {SHARDS[1]} "
        f"(sha256 {sha256(bytes(corrupt))[:12]}, the hub's {MANIFEST[SHARDS[1]]['sha256'][:12]})"
    ) in result["msg"]


def test_a_small_file_is_proven_by_its_git_blob_sha1():
    result = check(observed(**{"config.json": b"[]"}))
    assert result["bad"] == ["config.json"]
    assert "config.json (git_sha1 " in result["msg"]


def test_check_mode_says_what_it_would_remove():
    result = check(observed(**{SHARDS[0]: b"z" * 1000}), removed=False)
    assert "(to remove)" in result["msg"]


def test_shard_with_a_size_other_than_the_hubs_fails_with_both_sizes():
    result = check(observed(**{SHARDS[0]: b"x" * 999}))
    assert not result["complete"]
    assert result["wrong_size"] == [f"{SHARDS[0]} (999 bytes, the hub reported 1000)"]
    assert result["bad"] == [SHARDS[0]]


def test_pitfall_overlong_partial_is_discarded():
    # A partial file longer than its blob: the ranged request for the rest answers 416 on every run.
    blob = MANIFEST[SHARDS[1]]["blob"]
    partial = {f"/cache/hub/models--org--m/blobs/{blob}.incomplete": 2001}
    result = check(observed(**{SHARDS[1]: None}), partial=partial)
    assert result["discard"] == list(partial)
    assert "partial downloads longer than their file (removed" in result["msg"]


def test_a_partial_download_shorter_than_its_file_is_kept_for_the_resume():
    blob = MANIFEST[SHARDS[1]]["blob"]
    partial = {f"/cache/hub/models--org--m/blobs/{blob}.incomplete": 1500}
    result = check(observed(**{SHARDS[1]: None}), partial=partial)
    assert result["discard"] == []
    assert not result["complete"]
    assert f"partial downloads left: /cache/hub/models--org--m/blobs/{blob}.incomplete" in result["msg"]


def test_missing_config_and_index_are_named():
    result = check(observed(**{"config.json": None, "model.safetensors.index.json": None}), index=None)
    assert result["missing"] == ["config.json", "model.safetensors.index.json"]


def test_every_manifest_file_must_be_there():
    manifest = dict(MANIFEST, **{"tokenizer.json": entry("tokenizer.json", b"tok")})
    result = check(observed(), manifest=manifest)
    assert result["missing"] == ["tokenizer.json"]


def test_no_snapshot_folder_says_never_fetched():
    result = check_snapshot("spark-2", SNAP, None, None, None, {})
    assert not result["complete"]
    assert "the model was never fetched here" in result["msg"]


def test_without_a_manifest_content_cannot_be_trusted():
    result = check(observed(), manifest=None)
    assert not result["complete"]
    assert "no hub manifest" in result["msg"]


def test_unreadable_index_is_a_problem():
    result = check(observed(), index="{not json")
    assert not result["complete"]
    assert "is not a safetensors index" in result["msg"]


def test_removal_targets_leave_a_shared_store_file_alone():
    folder = "/c/hub/models--org--m"
    blob = MANIFEST[SHARDS[0]]["blob"]
    targets = removal_targets(
        folder,
        SNAP,
        [SHARDS[0], SHARDS[1]],
        MANIFEST,
        {SHARDS[0]: "/c/hub/blobs/ab/xethash", SHARDS[1]: f"{folder}/blobs/{MANIFEST[SHARDS[1]]['blob']}"},
    )
    assert targets == [
        f"{SNAP}/{SHARDS[0]}",
        f"{folder}/blobs/{blob}",
        f"{SNAP}/{SHARDS[1]}",
        f"{folder}/blobs/{MANIFEST[SHARDS[1]]['blob']}",
    ]
