"""The completeness rules of plugins/module_utils/_weights.py (seed 004 pitfalls 5 and 6), proven by content."""

import hashlib
import json
import os

from ansible_collections.gb10.serving.plugins.module_utils import _weights

SNAP = "/var/lib/gb10/hf-cache/hub/models--org--m/snapshots/" + "a" * 40
SHARDS = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
INDEX = json.dumps({"metadata": {"total_size": 3}, "weight_map": {"a": SHARDS[0], "b": SHARDS[1], "c": SHARDS[1]}})
CONTENT = {
    "config.json": b"{}",
    "model.safetensors.index.json": INDEX.encode(),
    SHARDS[0]: b"x" * 1000,
    SHARDS[1]: b"y" * 2000,
}


def git_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def entry(path, data):
    if path.endswith(".safetensors"):
        return {"size": len(data), "blob": sha256(data), "sha256": sha256(data)}
    return {"size": len(data), "blob": git_sha1(data), "git_oid": git_sha1(data)}


MANIFEST = {path: entry(path, data) for path, data in CONTENT.items()}


def digests(data, git=True):
    found = {"size": len(data), "sha256": sha256(data)}
    if git:
        found["git_sha1"] = git_sha1(data)
    return found


def observed(**overrides):
    files = dict(CONTENT)
    files.update(overrides)
    return {k: digests(v, git=not k.endswith(".safetensors")) for k, v in files.items() if v is not None}


def check(files, index=INDEX, manifest=MANIFEST, partial=None, removed=True):
    return _weights.check_snapshot("spark-2", SNAP, files, index, manifest, partial or {}, removed=removed)


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
    result = _weights.check_snapshot("spark-2", SNAP, None, None, None, {})
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


def test_manifest_keeps_the_lfs_sha256_and_the_git_oid_of_other_files():
    entries = [
        {"type": "file", "path": "config.json", "size": 10, "oid": "gitoid"},
        {"type": "file", "path": SHARDS[0], "size": 1000, "oid": "ptr", "lfs": {"oid": "sha", "size": 1000}},
        {"type": "directory", "path": "sub", "oid": "tree"},
    ]
    assert _weights.manifest_from_tree(entries) == {
        "config.json": {"size": 10, "blob": "gitoid", "git_oid": "gitoid"},
        SHARDS[0]: {"size": 1000, "blob": "sha", "sha256": "sha"},
    }


def test_a_manifest_of_sizes_and_blob_names_still_proves_content():
    # Manifests recorded before the digests: the blob name is the hub's ETag, a sha256 for LFS, a git sha1 else.
    assert _weights.expected_digests({"size": 1, "blob": "a" * 64}) == {"sha256": "a" * 64}
    assert _weights.expected_digests({"size": 1, "blob": "b" * 40}) == {"git_sha1": "b" * 40}
    assert _weights.expected_digests({"size": 1, "blob": "neither"}) == {}


def test_fingerprint_is_over_content():
    a = _weights.fingerprint({"x": {"sha256": "1"}, "y": {"sha256": "2"}})
    assert a == _weights.fingerprint({"y": {"sha256": "2"}, "x": {"sha256": "1"}})
    assert a != _weights.fingerprint({"x": {"sha256": "1"}, "y": {"sha256": "3"}})


def test_hash_file_matches_git_and_sha256(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"hello\n")
    assert _weights.hash_file(str(path), 6, git=True) == {
        "sha256": sha256(b"hello\n"),
        "git_sha1": "ce013625030ba8dba906f756967f9e9ca394464a",  # git hash-object of "hello\n"
    }


def test_hash_cache_answers_until_the_file_changes(tmp_path):
    path = tmp_path / "blob"
    path.write_bytes(b"a" * 10)
    cache = _weights.remember({}, "hub/blob", os.stat(path), {"sha256": "s"})
    assert _weights.cached_digests(cache, "hub/blob", os.stat(path)) == {"sha256": "s"}
    assert _weights.cached_digests(cache, "hub/blob", os.stat(path), want_git=True) is None
    stat = os.stat(path)
    path.write_bytes(b"b" * 10)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size, mtime put back: ctime still moved
    assert _weights.cached_digests(cache, "hub/blob", os.stat(path)) is None
    text = _weights.dump_hash_cache(cache)
    assert _weights.load_hash_cache(text) == cache
    assert _weights.load_hash_cache("{broken") == {}


def test_cache_key_is_the_path_under_the_cache_root():
    assert _weights.cache_key("/c", "/c/hub/blobs/ab/x") == "hub/blobs/ab/x"
    assert _weights.cache_key("/c", "/elsewhere/x") == "/elsewhere/x"


def test_removal_targets_leave_a_shared_store_file_alone():
    folder = "/c/hub/models--org--m"
    blob = MANIFEST[SHARDS[0]]["blob"]
    targets = _weights.removal_targets(
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


def test_repo_folder_matches_the_plans_snapshot_dir():
    from ansible_collections.gb10.serving.plugins.module_utils import _plan

    folder = _weights.repo_folder("gb10-sim/tiny-moe")
    assert _plan.snapshot_dir("gb10-sim/tiny-moe", "r").startswith(f"hub/{folder}/snapshots/")


def status(**fields):
    base = {"bytes_done": 0, "bytes_total": 100 << 20, "finished": False, "error": None, "time": 1000.0}
    return {**base, **fields}


def progress(state, now=1001.0, round_no=3):
    return _weights.progress_round("spark-1", "fetch", state, now, round_no, 960, 15, 120, "gb10-weights-fetch")


def test_progress_line_has_bytes_rate_and_eta():
    state = status(bytes_done=30 << 20, bytes_at_start=10 << 20, started=990.0)
    result = progress(state)
    assert not result["ended"] and result["error"] is None
    assert result["msg"] == ("spark-1 fetch: 30.0 MiB of 100.0 MiB (30.0%), 2.0 MiB/s, ETA 35 s, round 3 of 960")


def test_progress_ends_on_the_final_status():
    assert progress(status(bytes_done=100 << 20, finished=True))["finished"]
    failed = progress(status(finished=True, error="x.safetensors: 5 attempts failed"))
    assert failed["error"] == failed["msg"] and failed["ended"]
    assert failed["msg"].startswith("spark-1: the fetch failed: x.safetensors: 5 attempts failed.")


def test_progress_fails_when_the_job_stopped_reporting():
    result = progress(status(), now=1200.0)
    assert result["error"] and result["ended"]
    assert "stopped reporting 200 s ago" in result["msg"] and "docker logs gb10-weights-fetch" in result["msg"]


def test_progress_without_a_status_file_waits_then_fails():
    assert not progress(None, round_no=2)["ended"]
    assert progress(None, round_no=9)["error"]
