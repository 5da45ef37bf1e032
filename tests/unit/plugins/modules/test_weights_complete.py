"""weights_complete on a real folder laid out as huggingface_hub lays out its cache (blobs + snapshot links)."""

import json
import os

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import _weights
from ansible_collections.gb10.serving.plugins.modules import weights_complete

REV = "5d0c2a8e4b1f7c3a9e6d2b8f0a4c6e1d3b5f7a9c"
SHARD = "model-00001-of-00001.safetensors"


@pytest.fixture
def cache(tmp_path):
    folder = tmp_path / "hub" / "models--org--m"
    snapshot = folder / "snapshots" / REV
    (folder / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    index = json.dumps({"weight_map": {"w": SHARD}}).encode()
    files = {"config.json": b"{}", "model.safetensors.index.json": index, SHARD: b"x" * 64}
    manifest = {}
    for number, (path, data) in enumerate(files.items()):
        blob = folder / "blobs" / f"blob{number}"
        blob.write_bytes(data)
        os.symlink(f"../../blobs/blob{number}", snapshot / path)
        manifest[path] = {"size": len(data), "blob": f"blob{number}"}
    manifest_path = tmp_path / "manifest.json"
    manifest_path.write_text(json.dumps(manifest))
    return tmp_path, folder, str(manifest_path)


def run(cache_dir, manifest):
    snapshot, observed, index_text, manifest_data, partial = weights_complete.observe(
        str(cache_dir), "org/m", REV, manifest
    )
    return _weights.check_snapshot("spark-2", snapshot, observed, index_text, manifest_data, partial)


def test_complete_cache_passes(cache):
    tmp_path, _folder, manifest = cache
    assert run(tmp_path, manifest)["complete"]


def test_pitfall_no_shared_filesystem_deleted_blob_is_a_missing_shard(cache):
    tmp_path, folder, manifest = cache
    (folder / "blobs" / "blob2").unlink()  # the link stays, dangling
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
    (folder / "blobs" / "blob2").write_bytes(b"x" * 10)
    assert run(tmp_path, manifest)["wrong_size"] == [f"{SHARD} (10 bytes, the hub reported 64)"]
