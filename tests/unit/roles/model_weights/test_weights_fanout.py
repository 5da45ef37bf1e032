# Copyright: gb10.serving maintainers
# Apache-2.0
"""The fan-out of roles/weights_transfer/files/weights_transfer.py: the real serve and receive on 127.0.0.1.

Issue 19: a sender of ``blobs/esc -> /victim`` then ``blobs/esc/pwned.txt`` wrote into /victim and the receiver
exited 0; any connection was served; any path was taken. Here a hostile sender (symlink escape, a path outside the
manifest, a blob whose sha256 is not the manifest's, the wrong token) is refused with nothing written outside the
model's cache folder, a receiver without the token or from an address not listed is refused by the server, and a
source whose blobs live in huggingface_hub's shared (Xet) store is sent as the plain layout.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import hf_cache_layout
import pytest
from source_loader import load

from ansible_collections.gb10.serving.plugins.module_utils._weights.hash_cache import load_hash_cache
from ansible_collections.gb10.serving.plugins.module_utils._weights.manifest import expected_digests, manifest_from_tree
from ansible_collections.gb10.serving.plugins.module_utils._weights.snapshot import check_snapshot
from ansible_collections.gb10.serving.plugins.modules import weights_complete

REPO = Path(__file__).resolve().parents[4]
SCRIPT = REPO / "roles" / "weights_transfer" / "files" / "weights_transfer.py"
transfer = load("gb10_weights_transfer_fanout", SCRIPT)

REV = "5d0c2a8e4b1f7c3a9e6d2b8f0a4c6e1d3b5f7a9c"
SHARDS = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
FILES = {
    "config.json": b'{"model_type": "tiny"}',
    "model.safetensors.index.json": json.dumps({"weight_map": {"a": SHARDS[0], "b": SHARDS[1]}}).encode(),
    SHARDS[0]: bytes(range(256)) * 1024,
    SHARDS[1]: bytes(reversed(range(256))) * 1536,
    "tokenizer/nested/vocab.txt": b"a\nb\n",
}
TOKEN = "run-token-0123456789abcdef"


def tree_entry(path, data):
    entry = {"type": "file", "path": path, "size": len(data)}
    if path.endswith(".safetensors"):
        entry["oid"] = "0" * 40
        entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 130}
    else:
        entry["oid"] = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    return entry


MANIFEST = manifest_from_tree([tree_entry(p, d) for p, d in FILES.items()])


def lay_out(root, shared=False):
    shards = [path for path in FILES if path.endswith(".safetensors")] if shared else ()
    return hf_cache_layout.lay_out(root / "hub", "org/m", REV, FILES, MANIFEST, shared=shards)


def write_private(path, text):
    path.write_text(text)
    path.chmod(0o600)
    return path


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def ends(tmp_path):
    source, target = tmp_path / "source", tmp_path / "target"
    for side in (source, target):
        (side / "state").mkdir(parents=True)
        (side / "state" / "manifest.json").write_text(json.dumps(MANIFEST))
        write_private(side / "state" / "fanout.token", TOKEN + "\n")
    return source, target


def script(side, command, *args):
    env = {**os.environ, "GB10_HF_HUB_CACHE": str(side / "hub")}
    argv = [
        sys.executable,
        str(SCRIPT),
        command,
        "--repo=org/m",
        f"--revision={REV}",
        f"--manifest={side / 'state' / 'manifest.json'}",
        f"--status={side / 'state' / f'status-{command}.json'}",
        f"--hash-cache={side / 'state' / 'hashes.json'}",
        f"--token-file={side / 'state' / 'fanout.token'}",
        "--timeout=20",
        *args,
    ]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def serve(side, port, *args):
    return script(side, "serve", "--bind=127.0.0.1", f"--port={port}", *args)


def receive(side, port, *args):
    return script(side, "receive", "--source=127.0.0.1", f"--port={port}", *args)


def finish(process):
    out, err = process.communicate(timeout=60)
    return process.returncode, out + err


def files_outside(root, folder):
    """Every file under ``root`` that is neither in the model's folder nor one of the role's state files."""
    found = []
    for top, _dirs, names in os.walk(root):
        for name in names:
            path = Path(top) / name
            if folder not in path.parents and "state" not in path.parts:
                found.append(str(path))
    return sorted(found)


def test_receive_takes_a_shared_store_snapshot_as_the_plain_layout_proven(ends):
    source, target = ends
    lay_out(source, shared=True)
    port = free_port()
    server = serve(source, port, "--allow=127.0.0.1")
    rc, out = finish(receive(target, port))
    assert rc == 0, out
    assert finish(server)[0] == 0
    folder = target / "hub" / "models--org--m"
    snapshot = folder / "snapshots" / REV
    for path, data in FILES.items():
        assert (snapshot / path).read_bytes() == data
        blob = folder / "blobs" / MANIFEST[path]["blob"]
        assert blob.is_file() and not blob.is_symlink()
        assert os.readlink(snapshot / path) == os.path.relpath(blob, (snapshot / path).parent)
    assert os.readlink(snapshot / "config.json") == f"../../blobs/{MANIFEST['config.json']['blob']}"
    # What the receiver hashed as it landed is not hashed again by the module: one cache, one format.
    cache = load_hash_cache((target / "state" / "hashes.json").read_text())
    seen = weights_complete.observe(str(target), "org/m", REV, str(target / "state" / "manifest.json"), cache)
    assert seen["hashed"] == []
    result = check_snapshot(
        "spark-2", seen["snapshot"], seen["observed"], seen["index_text"], seen["manifest"], seen["partial"]
    )
    assert result["complete"], result["msg"]


def test_pitfall_wrong_shard_is_repaired_by_the_next_copy(ends):
    source, target = ends
    lay_out(source)
    folder = lay_out(target)
    bad = folder / "blobs" / MANIFEST[SHARDS[1]]["blob"]
    with open(bad, "r+b") as handle:
        handle.seek(4096)
        handle.write(b"\0" * 14)
    port = free_port()
    server = serve(source, port, "--allow=127.0.0.1")
    rc, out = finish(receive(target, port))
    assert rc == 0, out
    finish(server)
    assert bad.read_bytes() == FILES[SHARDS[1]]
    status = json.loads((target / "state" / "status-receive.json").read_text())
    assert status["bytes_at_start"] == sum(e["size"] for p, e in MANIFEST.items() if p != SHARDS[1])


class HostileSender(threading.Thread):
    """A server that speaks the handshake (with ``token``) and then sends ``members`` [(TarInfo, bytes | None)]."""

    def __init__(self, port, members, token=TOKEN):
        super().__init__(daemon=True)
        self.listener = socket.create_server(("127.0.0.1", port))
        self.members, self.token, self.error = members, token, None

    def run(self):
        conn, _peer = self.listener.accept()
        with conn:
            try:
                with conn.makefile("rb") as reader:
                    conn.sendall(b'{"nonce": "n"}\n')
                    hello = json.loads(reader.readline())
                    # Its proof of whatever token it holds, whether or not the receiver proved the run's.
                    proof = transfer._proof(self.token, "serve", hello["nonce"])
                    conn.sendall(json.dumps({"proof": proof}).encode() + b"\n")
                with conn.makefile("wb") as writer, tarfile.open(fileobj=writer, mode="w|") as tar:
                    for member, data in self.members:
                        tar.addfile(member, io.BytesIO(data) if data is not None else None)
            except OSError as exc:  # the receiver hung up on what it refused
                self.error = exc
        self.listener.close()


def regular(name, data):
    member = tarfile.TarInfo(name)
    member.size = len(data)
    return member, data


def symlink(name, target):
    member = tarfile.TarInfo(name)
    member.type, member.linkname = tarfile.SYMTYPE, target
    return member, None


def hostile(ends, tmp_path, members, token=TOKEN):
    _source, target = ends
    victim = tmp_path / "victim"
    victim.mkdir(exist_ok=True)
    port = free_port()
    sender = HostileSender(port, members(victim), token)
    sender.start()
    rc, out = finish(receive(target, port))
    sender.join(timeout=30)
    folder = target / "hub" / "models--org--m"
    assert rc != 0, out
    assert list(victim.iterdir()) == []
    assert files_outside(tmp_path, folder) == []
    assert not list(folder.rglob("*.incomplete"))
    return out, json.loads((target / "state" / "status-receive.json").read_text())


def test_pitfall_symlink_escape_is_refused_and_nothing_lands_outside(ends, tmp_path):
    _out, status = hostile(
        ends,
        tmp_path,
        lambda victim: [symlink("blobs/esc", str(victim)), regular("blobs/esc/pwned.txt", b"pwned")],
    )
    assert "refusing the link blobs/esc -> " in status["error"] and status["finished"]
    assert not (tmp_path / "target" / "hub" / "models--org--m" / "blobs" / "esc").exists()


def test_a_snapshot_link_that_climbs_out_is_refused(ends, tmp_path):
    _out, status = hostile(
        ends, tmp_path, lambda victim: [symlink(f"snapshots/{REV}/config.json", f"../../../../../{victim.name}")]
    )
    assert f"refusing the link snapshots/{REV}/config.json" in status["error"]


def test_a_path_outside_the_manifest_is_refused(ends, tmp_path):
    _out, status = hostile(ends, tmp_path, lambda victim: [regular(f"snapshots/{REV}/modeling_evil.py", b"import os")])
    assert f"refusing snapshots/{REV}/modeling_evil.py: not a blob of the manifest" in status["error"]
    _out, status = hostile(ends, tmp_path, lambda victim: [regular("blobs/../../../../victim/x", b"x")])
    assert "refusing blobs/../../../../victim/x" in status["error"]


def test_a_blob_whose_sha256_is_not_the_manifests_is_refused(ends, tmp_path):
    blob = MANIFEST[SHARDS[0]]["blob"]
    wrong = b"\0" * len(FILES[SHARDS[0]])
    _out, status = hostile(ends, tmp_path, lambda victim: [regular(f"blobs/{blob}", wrong)])
    assert status["error"] == (
        f"refusing blobs/{blob}: its sha256 is {hashlib.sha256(wrong).hexdigest()}, the manifest's {blob}"
    )
    assert not (tmp_path / "target" / "hub" / "models--org--m" / "blobs" / blob).exists()


def test_a_sender_without_the_token_is_refused_before_anything_is_read(ends, tmp_path):
    blob = MANIFEST[SHARDS[0]]["blob"]
    _out, status = hostile(
        ends, tmp_path, lambda victim: [regular(f"blobs/{blob}", FILES[SHARDS[0]])], token="another-run-token-000"
    )
    assert status["error"].startswith("the source did not prove the run's token")
    assert not (tmp_path / "target" / "hub" / "models--org--m" / "blobs" / blob).exists()


def test_the_server_refuses_a_wrong_token_and_an_unlisted_address_and_serves_the_peer(ends, tmp_path):
    source, target = ends
    lay_out(source)
    intruder = tmp_path / "intruder"
    (intruder / "state").mkdir(parents=True)
    (intruder / "state" / "manifest.json").write_text(json.dumps(MANIFEST))
    write_private(intruder / "state" / "fanout.token", "not-the-run-token-0000\n")
    port = free_port()
    server = serve(source, port, "--allow=127.0.0.2,127.0.0.3", "--peers=1")
    rc, out = finish(receive(intruder, port, "--local-address=127.0.0.3"))
    assert rc != 0 and not list((intruder / "hub").rglob("*.safetensors"))
    shutil.copy(target / "state" / "fanout.token", intruder / "state" / "fanout.token")
    rc, out = finish(receive(intruder, port, "--local-address=127.0.0.4"))
    assert rc != 0 and not list((intruder / "hub").rglob("*.safetensors"))
    for garbage in ('{"proof": "\u00e9", "want": 5}\n', "[1, 2]\n", "not json\n", ""):
        with socket.create_connection(("127.0.0.1", port), source_address=("127.0.0.2", 0)) as liar:
            liar.recv(4096)
            liar.sendall(garbage.encode())
    rc, out = finish(receive(target, port, "--local-address=127.0.0.2"))
    assert rc == 0, out
    rc, served = finish(server)
    assert rc == 0
    assert "refused 127.0.0.3: it did not prove the run's token" in served
    assert "refused 127.0.0.4: not one of the peers 127.0.0.2, 127.0.0.3" in served
    assert "served 127.0.0.2" in served


def test_a_token_file_others_may_read_is_refused(ends):
    source, _target = ends
    (source / "state" / "fanout.token").chmod(0o644)
    rc, out = finish(serve(source, free_port(), "--allow=127.0.0.1"))
    assert rc != 0
    assert "must be a regular file of mode 0600 (it is -rw-r--r--)" in out


def test_the_script_reads_manifests_and_digests_as_the_module_does():
    entries = [tree_entry(p, d) for p, d in FILES.items()]
    assert transfer.manifest_from_tree(entries) == manifest_from_tree(entries)
    for entry in [*MANIFEST.values(), {"size": 1, "blob": "a" * 64}, {"size": 1, "blob": "b" * 40}, {"blob": "x"}]:
        assert transfer.expected_digests(entry) == expected_digests(entry)


def test_hf_link_climbs_out_of_nested_snapshot_paths():
    assert transfer.hf_link("config.json", "b1") == "../../blobs/b1"
    assert transfer.hf_link("tokenizer/nested/vocab.txt", "b1") == "../../../../blobs/b1"
    for bad in ("/etc/passwd", "../x", "a/../../x", "a//b", ""):
        with pytest.raises(transfer.Refused):
            transfer.safe_path(bad)


def test_a_proven_blob_whose_link_went_is_linked_again_not_copied(ends):
    source, target = ends
    lay_out(source)
    folder = lay_out(target)
    (folder / "snapshots" / REV / SHARDS[0]).unlink()
    port = free_port()
    server = serve(source, port, "--allow=127.0.0.1")
    rc, out = finish(receive(target, port))
    assert rc == 0, out
    finish(server)
    assert (folder / "snapshots" / REV / SHARDS[0]).read_bytes() == FILES[SHARDS[0]]
    status = json.loads((target / "state" / "status-receive.json").read_text())
    assert status["bytes_at_start"] == status["bytes_total"] == status["bytes_done"]


def test_a_local_link_out_of_the_model_folder_is_refused_before_anything_is_made(ends, tmp_path):
    _source, target = ends
    victim = tmp_path / "victim"
    victim.mkdir()
    folder = target / "hub" / "models--org--m"
    folder.mkdir(parents=True)
    os.symlink(victim, folder / "snapshots")
    rc, out = finish(receive(target, free_port()))
    assert rc != 0 and "leads outside" in out
    assert list(victim.iterdir()) == []


def test_pitfall_disk_filled_after_the_preflight_the_receiver_refuses_before_it_connects(ends):
    # No source listens on the port: the receiver measures its disk before it connects, and refuses what does not
    # fit with the reserve (a petabyte here) without waiting for a source or writing anything.
    _source, target = ends
    rc, out = finish(receive(target, free_port(), "--reserve-gib=1048576", "--host-cache-dir=/var/lib/gb10/hf-cache"))
    assert rc == 5, out
    assert "/var/lib/gb10/hf-cache has" in out and "plus the 1.04858e+06 GiB reserve" in out
    status = json.loads((target / "state" / "status-receive.json").read_text())
    assert status["finished"] and "GiB free" in status["error"]
    assert not (target / "hub").exists()
