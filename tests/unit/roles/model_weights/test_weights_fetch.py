# Copyright: gb10.serving maintainers
# Apache-2.0
"""The fetch of roles/weights_transfer/files/weights_transfer.py proves every blob by content (issue 19).

huggingface_hub's calls are stood in for (the real client against the simulation's hub is
tests/integration/test_hub_client.py): a blob already there with the hub's size but not its content is fetched
again, a partial file longer than its blob is discarded instead of asked for with a Range the hub answers 416, and
a download whose content is not the hub's is retried.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from types import SimpleNamespace

import huggingface_hub
import huggingface_hub.file_download
import pytest
from source_loader import load

from ansible_collections.gb10.serving.plugins.module_utils._weights.hash_cache import load_hash_cache
from ansible_collections.gb10.serving.plugins.module_utils._weights.manifest import manifest_from_tree
from ansible_collections.gb10.serving.plugins.module_utils._weights.snapshot import check_snapshot
from ansible_collections.gb10.serving.plugins.modules import weights_complete

REPO = Path(__file__).resolve().parents[4]
transfer = load("gb10_weights_transfer_fetch", REPO / "roles" / "weights_transfer" / "files" / "weights_transfer.py")

REV = "5d0c2a8e4b1f7c3a9e6d2b8f0a4c6e1d3b5f7a9c"
SHARD = "model-00001-of-00001.safetensors"
FILES = {
    "config.json": b"{}",
    "model.safetensors.index.json": json.dumps({"weight_map": {"w": SHARD}}).encode(),
    SHARD: bytes(range(256)) * 64,
}


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def git_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def repo_file(path, data):
    lfs = SimpleNamespace(sha256=sha256(data)) if path.endswith(".safetensors") else None
    return SimpleNamespace(path=path, size=len(data), blob_id=git_sha1(data), lfs=lfs)


class Hub:
    """The calls the fetch makes, answered from FILES; ``spoil`` maps a path to bodies sent before the real one."""

    def __init__(self, cache):
        self.cache, self.spoil, self.ranges = cache, {}, []

    def install(self, monkeypatch):
        hub = self

        class Api:
            def __init__(self, endpoint=None, token=None):
                pass

            def model_info(self, repo, revision=None):
                return SimpleNamespace(sha=revision)

            def list_repo_tree(self, repo, revision=None, recursive=False):
                return [repo_file(p, d) for p, d in FILES.items()]

        def http_get(url, handle, resume_size=0, headers=None, expected_size=None):
            path = url.rsplit("/", 1)[1]
            hub.ranges.append((path, resume_size))
            if resume_size >= expected_size:
                raise AssertionError(f"{path}: a Range from {resume_size} of {expected_size} bytes answers 416")
            bodies = hub.spoil.get(path) or []
            body = bodies.pop(0) if bodies else FILES[path]
            handle.write(body[resume_size:])

        def snapshot_download(repo, revision=None, cache_dir=None, **_kwargs):
            folder = Path(cache_dir) / "models--org--m"
            snapshot = folder / "snapshots" / revision
            snapshot.mkdir(parents=True, exist_ok=True)
            for path, data in FILES.items():
                blob = sha256(data) if path.endswith(".safetensors") else git_sha1(data)
                link = snapshot / path
                if not os.path.lexists(link):
                    os.symlink(f"../../blobs/{blob}", link)
            return str(snapshot)

        monkeypatch.setattr(huggingface_hub, "HfApi", Api)
        monkeypatch.setattr(huggingface_hub, "hf_hub_url", lambda repo, path, **_kw: f"http://hub/{path}")
        monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
        monkeypatch.setattr(huggingface_hub.file_download, "http_get", http_get)
        monkeypatch.setattr(transfer, "CACHE", str(self.cache / "hub"))
        monkeypatch.setattr(transfer.time, "sleep", lambda _s: None)


@pytest.fixture
def hub(tmp_path, monkeypatch):
    hub = Hub(tmp_path)
    hub.install(monkeypatch)
    return hub


def fetch(tmp_path, capsys, *extra):
    argv = [
        "fetch",
        "--repo=org/m",
        f"--revision={REV}",
        "--endpoint=http://hub",
        f"--manifest={tmp_path / 'manifest.json'}",
        f"--status={tmp_path / 'status.json'}",
        f"--hash-cache={tmp_path / 'hashes.json'}",
        *extra,
    ]
    rc = transfer.main(argv)
    return rc, capsys.readouterr().out, json.loads((tmp_path / "status.json").read_text())


def blob(tmp_path, path):
    data = FILES[path]
    name = sha256(data) if path.endswith(".safetensors") else git_sha1(data)
    return tmp_path / "hub" / "models--org--m" / "blobs" / name


def test_fetch_records_the_digests_and_the_module_hashes_nothing_again(hub, tmp_path, capsys):
    rc, _out, status = fetch(tmp_path, capsys)
    assert rc == 0, status
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest[SHARD]["sha256"] == sha256(FILES[SHARD])
    assert manifest["config.json"]["git_oid"] == git_sha1(FILES["config.json"])
    cache = load_hash_cache((tmp_path / "hashes.json").read_text())
    seen = weights_complete.observe(str(tmp_path), "org/m", REV, str(tmp_path / "manifest.json"), cache)
    assert seen["hashed"] == []
    assert check_snapshot("n", seen["snapshot"], seen["observed"], seen["index_text"], manifest, {})["complete"]


def test_pitfall_wrong_shard_of_the_hubs_size_is_fetched_again(hub, tmp_path, capsys):
    path = blob(tmp_path, SHARD)
    path.parent.mkdir(parents=True)
    spoiled = bytearray(FILES[SHARD])
    spoiled[4096:4110] = b"\0" * 14
    path.write_bytes(bytes(spoiled))
    rc, out, _status = fetch(tmp_path, capsys)
    assert rc == 0
    assert f"{SHARD}: the blob here is not the hub's (sha256 {sha256(bytes(spoiled))}" in out
    assert path.read_bytes() == FILES[SHARD]


def test_pitfall_overlong_partial_is_discarded_not_resumed(hub, tmp_path, capsys):
    partial = Path(str(blob(tmp_path, SHARD)) + ".incomplete")
    partial.parent.mkdir(parents=True)
    partial.write_bytes(FILES[SHARD] + b"tail")
    rc, out, _status = fetch(tmp_path, capsys)
    assert rc == 0
    assert f"{SHARD}: partial file longer than the hub's {len(FILES[SHARD])} bytes; discarded" in out
    assert (SHARD, 0) in hub.ranges
    assert blob(tmp_path, SHARD).read_bytes() == FILES[SHARD]


def test_a_download_that_is_not_the_hubs_content_is_fetched_again(hub, tmp_path, capsys):
    hub.spoil[SHARD] = [b"\1" * len(FILES[SHARD])]
    rc, out, _status = fetch(tmp_path, capsys)
    assert rc == 0
    assert f"{SHARD}: attempt 1 brought content that is not the hub's" in out
    assert blob(tmp_path, SHARD).read_bytes() == FILES[SHARD]


def test_content_that_never_matches_fails_naming_the_file(hub, tmp_path, capsys):
    hub.spoil[SHARD] = [b"\1" * len(FILES[SHARD])] * 5
    rc, _out, status = fetch(tmp_path, capsys)
    assert rc == 4
    assert status["error"].startswith(f"{SHARD}: 5 attempts failed")
    assert not blob(tmp_path, SHARD).exists()


def free_space(monkeypatch, free):
    monkeypatch.setattr(transfer.shutil, "disk_usage", lambda _path: SimpleNamespace(total=free, used=0, free=free))


def test_pitfall_disk_filled_after_the_preflight_the_fetch_measures_again_before_it_writes(
    hub, tmp_path, monkeypatch, capsys
):
    # The preflight found room; the image pull and the driver packages that ran since took it. The fetch measures
    # the cache's disk itself, right before it writes, and writes nothing.
    free_space(monkeypatch, 1024)
    rc, _out, status = fetch(tmp_path, capsys, "--reserve-gib=0.5", "--host-cache-dir=/var/lib/gb10/hf-cache")
    assert rc == 6
    assert status["finished"] and status["error"].startswith("/var/lib/gb10/hf-cache has 0.0 GiB free")
    assert "plus the 0.5 GiB reserve" in status["error"] and "model_weights_disk_reserve_gib" in status["error"]
    assert hub.ranges == []
    assert not (tmp_path / "manifest.json").exists()


def test_blobs_another_revision_brought_need_no_room(hub, tmp_path, monkeypatch, capsys):
    # An upgrade that changes config.json only: the shard's blob is there already (shared with the old revision),
    # so the fetch needs room for config.json and the index, not for the whole snapshot.
    path = blob(tmp_path, SHARD)
    path.parent.mkdir(parents=True)
    path.write_bytes(FILES[SHARD])
    needed = len(FILES["config.json"]) + len(FILES["model.safetensors.index.json"])
    free_space(monkeypatch, needed)
    rc, _out, status = fetch(tmp_path, capsys, "--reserve-gib=0")
    assert rc == 0, status
    assert SHARD not in [path for path, _start in hub.ranges]


def test_a_partial_file_counts_as_written(tmp_path):
    folder = tmp_path / "models--org--m"
    (folder / "blobs").mkdir(parents=True)
    manifest = manifest_from_tree(
        [{"type": "file", "path": SHARD, "size": len(FILES[SHARD]), "lfs": {"oid": sha256(FILES[SHARD])}}]
    )
    (folder / "blobs" / (sha256(FILES[SHARD]) + ".incomplete")).write_bytes(FILES[SHARD][:1000])
    assert transfer.missing_bytes(str(folder), manifest) == len(FILES[SHARD]) - 1000
