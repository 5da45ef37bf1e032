"""weights_complete on a real folder laid out as huggingface_hub lays out its cache (blobs + snapshot links)."""

import hashlib
import json
import os
from pathlib import Path

import hf_cache_layout
import pytest
from module_harness import run_main

from ansible_collections.gb10.serving.plugins.module_utils._weights.snapshot import check_snapshot
from ansible_collections.gb10.serving.plugins.modules import weights_complete

REV = "5d0c2a8e4b1f7c3a9e6d2b8f0a4c6e1d3b5f7a9c"
SHARD = "model-00001-of-00001.safetensors"
INDEX = json.dumps({"weight_map": {"w": SHARD}}).encode()
FILES = {"config.json": b"{}", "model.safetensors.index.json": INDEX, SHARD: b"x" * 8192}


def manifest_entry(path, data):
    if path.endswith(".safetensors"):
        digest = hashlib.sha256(data).hexdigest()
        return {"size": len(data), "blob": digest, "sha256": digest}
    oid = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    return {"size": len(data), "blob": oid, "git_oid": oid}


MANIFEST = {path: manifest_entry(path, data) for path, data in FILES.items()}


def lay_out(tmp_path, shared=False):
    """The cache as hf_hub_download leaves it; ``shared``: blobs in the cache-wide store, as Xet downloads do."""
    folder = hf_cache_layout.lay_out(tmp_path / "hub", "org/m", REV, FILES, MANIFEST, shared=FILES if shared else ())
    manifest_path = tmp_path / "manifest.json"
    manifest_path.write_text(json.dumps(MANIFEST))
    return folder


@pytest.fixture
def cache(tmp_path):
    return tmp_path, lay_out(tmp_path), str(tmp_path / "manifest.json")


def run(cache_dir, manifest):
    seen = weights_complete.observe(str(cache_dir), "org/m", REV, manifest)
    return check_snapshot(
        "spark-2", seen["snapshot"], seen["observed"], seen["index_text"], seen["manifest"], seen["partial"]
    )


def module(tmp_path, check_mode=False, **extra):
    args = {
        "node": "spark-2",
        "cache_dir": str(tmp_path),
        "repo_id": "org/m",
        "revision": REV,
        "manifest": str(tmp_path / "manifest.json"),
        "hash_cache": str(tmp_path / "hashes.json"),
        "remove_bad": True,
        "_ansible_check_mode": check_mode,
        **extra,
    }
    return run_main(weights_complete.main, args, None)


def corrupt(folder):
    blob = folder / "blobs" / MANIFEST[SHARD]["blob"]
    with open(blob, "r+b") as handle:
        handle.seek(4096)
        handle.write(b"\xff" * 14)
    return blob


def test_complete_cache_passes(cache):
    tmp_path, _folder, manifest = cache
    assert run(tmp_path, manifest)["complete"]


def test_pitfall_shared_blob_store_layout_is_accepted(tmp_path):
    # hf download / vLLM with Xet: blobs/<etag> links to the cache-wide store, ../../blobs/<xx>/<hash>.
    lay_out(tmp_path, shared=True)
    result = module(tmp_path)
    assert result["complete"], result["msg"]
    assert result["sha256"][SHARD] == MANIFEST[SHARD]["sha256"]


def test_pitfall_no_shared_filesystem_deleted_blob_is_a_missing_shard(cache):
    tmp_path, folder, manifest = cache
    (folder / "blobs" / MANIFEST[SHARD]["blob"]).unlink()  # the link stays, dangling
    result = run(tmp_path, manifest)
    assert result["missing"] == [SHARD]
    assert result["msg"].startswith("spark-2: missing from ")


def test_leftover_incomplete_blob_fails(cache):
    tmp_path, folder, manifest = cache
    (folder / "blobs" / "blob9.incomplete").write_bytes(b"y")
    result = run(tmp_path, manifest)
    assert not result["complete"]
    assert result["partial"] == [str(folder / "blobs" / "blob9.incomplete")]


def test_truncated_blob_fails_on_size(cache):
    tmp_path, folder, manifest = cache
    (folder / "blobs" / MANIFEST[SHARD]["blob"]).write_bytes(b"x" * 10)
    assert run(tmp_path, manifest)["wrong_size"] == [f"{SHARD} (10 bytes, the hub reported 8192)"]


def test_pitfall_wrong_shard_is_named_and_removed_so_the_next_fetch_gets_it(cache):
    tmp_path, folder, _manifest = cache
    blob = corrupt(folder)
    blob_bytes = blob.read_bytes()
    result = module(tmp_path)
    assert result["changed"] and not result["complete"]
    assert result["wrong_content"] == [SHARD]
    assert f"spark-2: content differs from the hub's in {folder}/snapshots/{REV} (removed): {SHARD}" in result["msg"]
    assert not os.path.lexists(blob) and not os.path.lexists(folder / "snapshots" / REV / SHARD)
    assert os.path.exists(folder / "snapshots" / REV / "config.json")
    assert result["warnings_emitted"] == [
        f"spark-2: content differs from the hub's in {folder}/snapshots/{REV} (removed): {SHARD} "
        f"(sha256 {hashlib.sha256(blob_bytes).hexdigest()[:12]}, the hub's {MANIFEST[SHARD]['sha256'][:12]})"
    ]


def test_check_mode_reports_the_wrong_shard_and_removes_nothing(cache):
    tmp_path, folder, _manifest = cache
    blob = corrupt(folder)
    result = module(tmp_path, check_mode=True)
    assert result["changed"] and not result["complete"]
    assert "(to remove)" in result["msg"]
    assert os.path.exists(blob) and str(blob) in result["removed"]
    assert not (tmp_path / "hashes.json").exists()


def test_overlong_partial_is_removed(cache):
    tmp_path, folder, _manifest = cache
    blob = folder / "blobs" / MANIFEST[SHARD]["blob"]
    blob.unlink()
    partial = folder / "blobs" / (MANIFEST[SHARD]["blob"] + ".incomplete")
    partial.write_bytes(b"x" * 9000)
    result = module(tmp_path)
    assert result["discard"] == [str(partial)] and not partial.exists()


def test_a_second_run_hashes_nothing_and_a_changed_blob_is_hashed_again(cache):
    tmp_path, folder, _manifest = cache
    first = module(tmp_path)
    assert first["complete"] and sorted(first["hashed"]) == sorted(FILES)
    second = module(tmp_path)
    assert second["complete"] and second["hashed"] == []
    assert second["fingerprint"] == first["fingerprint"]
    corrupt(folder)
    third = module(tmp_path)
    assert third["hashed"] == [SHARD] and third["wrong_content"] == [SHARD]


def test_a_wrong_shard_in_a_shared_store_is_unlinked_and_the_store_left_alone(tmp_path):
    folder = lay_out(tmp_path, shared=True)
    entry = folder / "blobs" / MANIFEST[SHARD]["blob"]
    store_file = Path(os.path.realpath(entry))
    with open(store_file, "r+b") as handle:
        handle.write(b"\xff" * 14)
    result = module(tmp_path)
    assert result["wrong_content"] == [SHARD]
    assert not os.path.lexists(entry) and not os.path.lexists(folder / "snapshots" / REV / SHARD)
    assert store_file.exists()  # another repository may link it; this one no longer does
