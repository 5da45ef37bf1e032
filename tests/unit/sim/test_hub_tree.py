"""The simulation's hub (sim/hub/hub.py) lists what the content proof of model_weights needs, as the real hub does.

The real huggingface_hub client reads the stand-in's tree listing: an LFS file's ``lfs.oid`` (``RepoFile.lfs.sha256``)
is the sha256 of its content, any other file's ``oid`` (``RepoFile.blob_id``) the git blob sha1 of its content, and
the manifest built from them proves the served bytes. A two-file repository, so it stays a unit test.
"""

from __future__ import annotations

import hashlib
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from source_loader import load

from ansible_collections.gb10.serving.plugins.module_utils._weights.manifest import (
    expected_digests,
    manifest_from_tree,
    tree_entries,
)

REPO = Path(__file__).resolve().parents[3]
COMMIT = "5d0c2a8e4b1f7c3a9e6d2b8f0a4c6e1d3b5f7a9c"
FILES = {"config.json": b'{"model_type": "tiny"}', "model-00001-of-00001.safetensors": b"\x01\x02" * 5000}


@pytest.fixture(scope="module")
def endpoint():
    hub = load("gb10_sim_hub_tree", REPO / "sim" / "hub" / "hub.py")
    repo = hub.Repo("gb10-sim/tiny-moe", {COMMIT: FILES}, {})
    server = ThreadingHTTPServer(("127.0.0.1", 0), hub.make_handler(repo, hub.State(), None))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_real_client_reads_the_digests_the_content_proof_needs(endpoint):
    from huggingface_hub import HfApi

    listed = {
        f.path: f
        for f in HfApi(endpoint=endpoint, token=False).list_repo_tree(
            "gb10-sim/tiny-moe", revision=COMMIT, recursive=True
        )
    }
    shard = listed["model-00001-of-00001.safetensors"]
    assert shard.lfs.sha256 == hashlib.sha256(FILES[shard.path]).hexdigest()
    config = listed["config.json"]
    assert config.lfs is None
    assert config.blob_id == hashlib.sha1(b"blob %d\0" % len(FILES["config.json"]) + FILES["config.json"]).hexdigest()
    # The entries as the fetch builds them from the client's objects.
    entries = tree_entries(listed.values())
    assert [e["path"] for e in entries] == list(listed)
    manifest = manifest_from_tree(entries)
    for path, data in FILES.items():
        digest = expected_digests(manifest[path])
        found = {
            "sha256": hashlib.sha256(data).hexdigest(),
            "git_sha1": config.blob_id if path == "config.json" else None,
        }
        assert all(found[name] == value for name, value in digest.items()), (path, digest)
