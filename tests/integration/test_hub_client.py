"""The simulation's hub (sim/hub) against the real huggingface_hub of the venv, and the role's fetch script.

No docker: the hub runs in a thread on 127.0.0.1. Proves what the model_weights scenario relies on: the real client
fetches the pinned revision byte-identical at 1.0x the repository's bytes; an unknown revision is a typed error;
a transfer cut midway whose client call then fails is resumed by weights_transfer.py with at most the missing
bytes plus one 10 MiB read chunk.
"""

from __future__ import annotations

import hashlib
import json
import sys
import threading
import urllib.request
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
from source_loader import load

REPO = Path(__file__).resolve().parents[2]
CHUNK = 10 * 1024 * 1024
TOKEN = "hf_testTokenForTheLocalHub"


hub = load("gb10_sim_hub", REPO / "sim/hub/hub.py")
tiny_moe = sys.modules["tiny_moe"]
transfer = load("gb10_weights_transfer", REPO / "roles/weights_transfer/files/weights_transfer.py")


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory):
    repo = hub.Repo(tiny_moe.REPO_ID, tiny_moe.repository(), tiny_moe.REFS)
    server = ThreadingHTTPServer(("127.0.0.1", 0), hub.make_handler(repo, hub.State(), TOKEN))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def sim(endpoint, action, method="POST"):
    request = urllib.request.Request(f"{endpoint}/_sim/{action}", method=method)
    with urllib.request.urlopen(request) as response:
        return json.load(response)


def test_real_client_fetches_the_pinned_revision_once(endpoint, tmp_path):
    from huggingface_hub import snapshot_download

    sim(endpoint, "reset")
    path = snapshot_download(
        tiny_moe.REPO_ID, revision=tiny_moe.REVISION_1, cache_dir=tmp_path, token=TOKEN, endpoint=endpoint
    )
    files = tiny_moe.repository()[tiny_moe.REVISION_1]
    for name, data in files.items():
        assert hashlib.sha256((Path(path) / name).read_bytes()).digest() == hashlib.sha256(data).digest()
    stats = sim(endpoint, "stats", "GET")
    assert stats["bytes_total"] == sum(len(d) for d in files.values())
    snapshot_download(
        tiny_moe.REPO_ID, revision=tiny_moe.REVISION_1, cache_dir=tmp_path, token=TOKEN, endpoint=endpoint
    )
    assert sim(endpoint, "stats", "GET")["bytes_total"] == stats["bytes_total"]


def test_shards_are_larger_than_the_clients_read_chunk():
    shards = {k: len(v) for k, v in tiny_moe.repository()[tiny_moe.REVISION_1].items() if k.endswith(".safetensors")}
    assert len(shards) == 4
    assert all(CHUNK < size < 3 * CHUNK for size in shards.values())


def test_unknown_revision_and_missing_token_are_typed_errors(endpoint, tmp_path):
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, RevisionNotFoundError

    with pytest.raises(RevisionNotFoundError):
        HfApi(endpoint=endpoint, token=TOKEN).model_info(tiny_moe.REPO_ID, revision="0" * 40)
    with pytest.raises(HfHubHTTPError):
        HfApi(endpoint=endpoint, token=False).model_info(tiny_moe.REPO_ID, revision=tiny_moe.REVISION_1)


def test_files_metadata_gives_every_size_and_lfs_sha256(endpoint):
    """The preflight sums these sizes for its free-disk check: the real client must read them as the hub sends them."""
    from huggingface_hub import HfApi

    info = HfApi(endpoint=endpoint, token=TOKEN).model_info(
        tiny_moe.REPO_ID, revision=tiny_moe.REVISION_1, files_metadata=True
    )
    files = tiny_moe.repository()[tiny_moe.REVISION_1]
    assert {s.rfilename: s.size for s in info.siblings} == {name: len(data) for name, data in files.items()}
    lfs = {s.rfilename: s.lfs.sha256 for s in info.siblings if s.lfs}
    assert lfs and lfs == {n: hashlib.sha256(files[n]).hexdigest() for n in files if tiny_moe.is_lfs(n)}
    assert all(s.blob_id for s in info.siblings)


def run_fetch(endpoint, tmp_path, revision, monkeypatch):
    monkeypatch.setattr(transfer, "CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(transfer.time, "sleep", lambda _s: None)
    env = tmp_path / "hub.env"
    env.write_text(f"HF_TOKEN={TOKEN}\n")
    argv = [
        "fetch",
        "--repo",
        tiny_moe.REPO_ID,
        "--revision",
        revision,
        "--endpoint",
        endpoint,
        "--env-file",
        str(env),
        "--manifest",
        str(tmp_path / "manifest.json"),
        "--status",
        str(tmp_path / "status.json"),
    ]
    return transfer.main(argv), json.loads((tmp_path / "status.json").read_text())


def test_pitfall_resume_after_a_failed_call_sends_at_most_one_chunk_more(endpoint, tmp_path, monkeypatch):
    shard = "model-00002-of-00004.safetensors"
    files = tiny_moe.repository()[tiny_moe.REVISION_1]
    sim(endpoint, "reset")
    # 12 MiB in, the connection drops; the 8 requests after it drop at once: huggingface_hub's http_get gives up after
    # 6 attempts without progress, so one client call fails and the script's next attempt must resume.
    sim(endpoint, f"cut?path={shard}&after={12 * 1024 * 1024}&drops=8")
    rc, status = run_fetch(endpoint, tmp_path, tiny_moe.REVISION_1, monkeypatch)
    assert rc == 0, status
    stats = sim(endpoint, "stats", "GET")
    assert stats["cut"] is None
    total = sum(len(d) for d in files.values())
    assert len(files[shard]) <= stats["by_path"][shard] <= len(files[shard]) + CHUNK
    assert stats["bytes_total"] <= total + CHUNK
    snapshot = tmp_path / "hub" / "models--gb10-sim--tiny-moe" / "snapshots" / tiny_moe.REVISION_1
    assert (snapshot / shard).read_bytes() == files[shard]
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest[shard]["size"] == len(files[shard])
    assert not list((tmp_path / "hub").rglob("*.incomplete"))


def test_unknown_revision_fails_the_fetch_clearly(endpoint, tmp_path, monkeypatch):
    rc, status = run_fetch(endpoint, tmp_path, "0123456789abcdef0123456789abcdef01234567", monkeypatch)
    assert rc == 3
    assert status["error"] == (
        f"the hub {endpoint} has no revision 0123456789abcdef0123456789abcdef01234567 of gb10-sim/tiny-moe"
    )
