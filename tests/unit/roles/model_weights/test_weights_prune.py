# Copyright: gb10.serving maintainers
# Apache-2.0
"""The prune of roles/weights_transfer/files/weights_transfer.py on a real Hugging Face cache (issue 19).

The cache is made by the real huggingface_hub of the venv (the version the serving image pins): snapshot_download of
two revisions of a small repository from the simulation's hub (sim/hub/hub.py) in a thread on 127.0.0.1. The two
revisions share a shard and the tokenizer; config.json and one shard differ. The script runs as the role deploys it
(beside the collection's _weights package, in a folder of its own, GB10_HF_HUB_CACHE standing for the container's
mount), and deletes with huggingface_hub's own scan_cache_dir -> delete_revisions -> execute.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from source_loader import load

REPO = Path(__file__).resolve().parents[4]
SCRIPT = REPO / "roles" / "weights_transfer" / "files" / "weights_transfer.py"
WEIGHTS = REPO / "plugins" / "module_utils" / "_weights"
hub = load("gb10_sim_hub_prune", REPO / "sim" / "hub" / "hub.py")

REPO_ID = "gb10-sim/prune"
OLD = "1111111111111111111111111111111111111111"
NEW = "2222222222222222222222222222222222222222"
SHARED_SHARD = bytes(range(256)) * 96  # in both revisions: one blob
OLD_SHARD = bytes(reversed(range(256))) * 64
NEW_SHARD = bytes(range(128)) * 160
TOKENIZER = b'{"vocab": {"a": 0}}'
REVISIONS = {
    OLD: {
        "config.json": b'{"model_type": "prune", "revision": 1}',
        "tokenizer.json": TOKENIZER,
        "model-00001-of-00002.safetensors": SHARED_SHARD,
        "model-00002-of-00002.safetensors": OLD_SHARD,
    },
    NEW: {
        "config.json": b'{"model_type": "prune", "revision": 2}',
        "tokenizer.json": TOKENIZER,
        "model-00001-of-00002.safetensors": SHARED_SHARD,
        "model-00002-of-00002.safetensors": NEW_SHARD,
    },
}


def blob_name(path, data):
    """The name huggingface_hub gives a blob: the sha256 of an LFS file, the git blob sha1 of any other."""
    if hub.tiny_moe.is_lfs(path):
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def serve(main):
    repo = hub.Repo(REPO_ID, REVISIONS, {"main": main})
    server = ThreadingHTTPServer(("127.0.0.1", 0), hub.make_handler(repo, hub.State(), None))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.fixture
def node(tmp_path, monkeypatch):
    """A node's cache holding OLD (fetched by its commit) and NEW, as the model_weights fetch leaves them, and the
    role's state folder with the deployed script and a manifest per revision."""

    def make(main=NEW):
        from huggingface_hub import snapshot_download

        monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
        server, endpoint = serve(main)
        cache = tmp_path / "hf-cache" / "hub"
        try:
            for revision in (OLD, NEW) if main == NEW else (NEW, OLD):
                # the branch that main names is fetched by that name, so huggingface_hub writes refs/main
                asked = "main" if revision == main else revision
                path = snapshot_download(REPO_ID, revision=asked, cache_dir=cache, token=False, endpoint=endpoint)
                assert Path(path).name == revision
        finally:
            server.shutdown()
        state = tmp_path / "state"
        (state / "manifests").mkdir(parents=True)
        shutil.copy2(SCRIPT, state / "weights_transfer.py")
        shutil.copytree(WEIGHTS, state / "_weights", ignore=shutil.ignore_patterns("__pycache__"))
        for revision in REVISIONS:
            (state / "manifests" / f"gb10-sim--prune@{revision}.json").write_text("{}")
        return cache, state

    return make


def prune(cache, state, *args):
    """The deployed script's prune, as the role's container runs it; returns (rc, the GB10-PRUNE result, output)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env.update(GB10_HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1")
    argv = [
        sys.executable,
        str(state / "weights_transfer.py"),
        "prune",
        f"--repo={REPO_ID}",
        f"--revision={NEW}",
        f"--manifest={state / 'manifests' / f'gb10-sim--prune@{NEW}.json'}",
        f"--status={state / 'status-prune.json'}",
        f"--record={state / 'served.json'}",
        *args,
    ]
    done = subprocess.run(argv, cwd=state, env=env, capture_output=True, text=True, timeout=120, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("GB10-PRUNE ")]
    result = json.loads(lines[-1].removeprefix("GB10-PRUNE ")) if lines else None
    return done.returncode, result, done.stdout + done.stderr


def folder(cache):
    return cache / "models--gb10-sim--prune"


def blob(cache, revision, path):
    return folder(cache) / "blobs" / blob_name(path, REVISIONS[revision][path])


def snapshot_intact(cache, revision):
    snapshot = folder(cache) / "snapshots" / revision
    return all((snapshot / path).read_bytes() == data for path, data in REVISIONS[revision].items())


def scan(cache):
    from huggingface_hub import scan_cache_dir

    info = scan_cache_dir(cache)
    assert info.warnings == [], info.warnings
    (repo,) = [r for r in info.repos if r.repo_id == REPO_ID]
    return {rev.commit_hash: sorted(rev.refs) for rev in repo.revisions}


def test_the_cache_is_huggingface_hubs_own_with_a_shared_blob(node):
    cache, _state = node()
    assert scan(cache) == {OLD: [], NEW: ["main"]}
    shared = blob(cache, OLD, "model-00001-of-00002.safetensors")
    assert shared == blob(cache, NEW, "model-00001-of-00002.safetensors") and shared.is_file()
    assert (folder(cache) / "refs" / "main").read_text() == NEW


def test_pitfall_superseded_revisions_fill_the_disk_the_prune_deletes_the_old_one(node):
    cache, state = node()
    unshared = [blob(cache, OLD, "config.json"), blob(cache, OLD, "model-00002-of-00002.safetensors")]
    freed = sum(path.stat().st_size for path in unshared)
    rc, result, out = prune(cache, state, "--keep=1")
    assert rc == 0, out
    assert result["pruned"] == [OLD] and result["kept"] == [NEW]
    assert result["freed_bytes"] == freed
    # the superseded snapshot and its unshared blobs are gone
    assert not (folder(cache) / "snapshots" / OLD).exists()
    assert not any(path.exists() for path in unshared)
    # the shared blobs and the kept revision are intact, refs/main still names it
    assert blob(cache, NEW, "model-00001-of-00002.safetensors").read_bytes() == SHARED_SHARD
    assert blob(cache, NEW, "tokenizer.json").read_bytes() == TOKENIZER
    assert snapshot_intact(cache, NEW)
    assert (folder(cache) / "refs" / "main").read_text() == NEW
    assert scan(cache) == {NEW: ["main"]}
    # the role's manifest of the deleted revision goes with it, and the record says NEW served
    assert sorted(p.name for p in (state / "manifests").iterdir()) == [f"gb10-sim--prune@{NEW}.json"]
    assert list(json.loads((state / "served.json").read_text())[REPO_ID]) == [NEW]
    # nothing is superseded any more: a second run deletes nothing
    rc, again, out = prune(cache, state, "--keep=1")
    assert rc == 0 and again["pruned"] == [] and again["freed_bytes"] == 0, out


def test_a_ref_to_the_deleted_revision_goes_with_it(node):
    # refs/main named OLD (fetched by the branch): huggingface_hub deletes the ref, none dangles.
    cache, state = node(main=OLD)
    assert scan(cache) == {OLD: ["main"], NEW: []}
    rc, result, out = prune(cache, state, "--keep=1")
    assert rc == 0, out
    assert result["pruned"] == [OLD]
    assert not (folder(cache) / "refs" / "main").exists()
    assert snapshot_intact(cache, NEW)
    assert scan(cache) == {NEW: []}


def test_dry_run_says_what_would_go_and_deletes_nothing(node):
    cache, state = node()
    before = sorted(str(p) for p in folder(cache).rglob("*"))
    rc, result, out = prune(cache, state, "--keep=1", "--dry-run")
    assert rc == 0, out
    assert result["dry_run"] is True and result["pruned"] == [OLD]
    assert result["freed_bytes"] == len(REVISIONS[OLD]["config.json"]) + len(OLD_SHARD)
    assert sorted(str(p) for p in folder(cache).rglob("*")) == before
    assert not (state / "served.json").exists()
    assert len(list((state / "manifests").iterdir())) == 2


def test_a_revision_in_use_and_keep_two_stay(node):
    cache, state = node()
    rc, result, out = prune(cache, state, "--keep=1", f"--in-use={OLD}")
    assert rc == 0, out
    assert result["pruned"] == [] and result["why"][OLD] == "kept: a running container has it mounted"
    rc, result, out = prune(cache, state, "--keep=2")
    assert rc == 0, out
    assert result["pruned"] == [] and sorted(result["kept"]) == [OLD, NEW]
    assert snapshot_intact(cache, OLD) and snapshot_intact(cache, NEW)


def test_a_cache_huggingface_hub_cannot_read_is_refused_not_read_as_nothing_to_delete(node):
    cache, state = node()
    (folder(cache) / "snapshots" / OLD / "config.json").unlink()
    os.symlink("../../blobs/" + "0" * 40, folder(cache) / "snapshots" / OLD / "config.json")
    rc, result, out = prune(cache, state, "--keep=1")
    assert rc == 5 and result is None
    assert "does not read gb10-sim/prune" in out and "Nothing was deleted" in out
    assert (folder(cache) / "snapshots" / OLD).is_dir()
