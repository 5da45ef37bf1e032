# Copyright: gb10.serving maintainers
# Apache-2.0
"""molecule/model_weights/files/hostile_fanout.py against the real weights_transfer.py on 127.0.0.1.

The model_weights scenario runs that script in a third container on the simulation's network (verify_hostile_fanout
.yml) against a node's receive and serve. Here it is proven to speak the real wire protocol first: its ``control``
sender is taken by the real receive (rc 0, the snapshot complete), so the receive's refusal of each attack is the
attack's doing, and its probe gets the real serve's challenge when listed, and not one byte when it is not.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
SCRIPT = REPO / "roles" / "weights_transfer" / "files" / "weights_transfer.py"
HOSTILE = REPO / "molecule" / "model_weights" / "files" / "hostile_fanout.py"

# The scenario's tiny model (verify_hostile_fanout.yml): blobs named by sha256, as the hub names LFS files.
REPO_ID = "gb10-hostile/tiny"
REV = "deadbeef" * 5
FILES = {"config.json": '{"model_type": "hostile-fanout-canary"}', "model.safetensors": "tiny-weights-0123456789"}
MANIFEST = {
    path: {"size": len(text), "blob": hashlib.sha256(text.encode()).hexdigest(), "sha256": None}
    for path, text in FILES.items()
}
for _entry in MANIFEST.values():
    _entry["sha256"] = _entry["blob"]
TOKEN = "hostile-run-token-0123456789abcdef"
FOLDER = "models--gb10-hostile--tiny"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def node(tmp_path):
    """A receiving node's state folder and cache, and the canary folder the escapes point at."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "manifest.json").write_text(json.dumps(MANIFEST))
    (state / "fanout.token").write_text(TOKEN + "\n")
    (state / "fanout.token").chmod(0o600)
    (tmp_path / "victim").mkdir()
    return tmp_path


def transfer(root, command, *args):
    env = {**os.environ, "GB10_HF_HUB_CACHE": str(root / "hub")}
    argv = [
        sys.executable,
        str(SCRIPT),
        command,
        f"--repo={REPO_ID}",
        f"--revision={REV}",
        f"--manifest={root / 'state' / 'manifest.json'}",
        f"--status={root / 'state' / f'status-{command}.json'}",
        f"--hash-cache={root / 'state' / 'hashes.json'}",
        f"--token-file={root / 'state' / 'fanout.token'}",
        "--timeout=20",
        *args,
    ]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def hostile(command, *args, token=None):
    env = {**os.environ, "HOSTILE_TOKEN": token} if token else dict(os.environ)
    argv = [sys.executable, str(HOSTILE), command, *args]
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(process):
    out, err = process.communicate(timeout=90)
    return process.returncode, out, err


def sender(port, attacks, victim, token=None):
    args = [f"--port={port}", "--bind=127.0.0.1", f"--revision={REV}", f"--victim={victim}", "--accept-timeout=30"]
    args += [f"--file={path}={text}" for path, text in FILES.items()]
    args += [f"--attack={attack}" for attack in attacks]
    if token:
        args.append("--token-env=HOSTILE_TOKEN")
    process = hostile("send", *args, token=token)
    assert json.loads(process.stdout.readline())["listening"] == f"127.0.0.1:{port}"  # it listens before receive
    return process


def every_file(root):
    return sorted(str(Path(top, name).relative_to(root)) for top, _dirs, names in os.walk(root) for name in names)


def receive_from(root, port):
    rc, out, err = finish(transfer(root, "receive", "--source=127.0.0.1", f"--port={port}"))
    return rc, out + err, json.loads((root / "state" / "status-receive.json").read_text())


def assert_nothing_outside(root):
    """Nothing in the canary folder, nothing named pwned anywhere, and only the manifest's blobs in the cache."""
    assert list((root / "victim").iterdir()) == []
    assert [path for path in every_file(root) if "pwned" in path] == []
    cache = root / "hub"
    blobs = {f"{FOLDER}/blobs/{entry['blob']}" for entry in MANIFEST.values()}
    links = {f"{FOLDER}/snapshots/{REV}/{path}": f"../../blobs/{e['blob']}" for path, e in MANIFEST.items()}
    found = every_file(cache) if cache.exists() else []
    assert {p for p in found if not (cache / p).is_symlink()} <= blobs
    assert {p: os.readlink(cache / p) for p in found if (cache / p).is_symlink()}.items() <= links.items()
    outside = [p for p in every_file(root) if not p.startswith(("state/", "hub/"))]
    assert outside == []


def test_a_sender_without_the_token_is_refused_naming_the_proof(node):
    port = free_port()
    server = sender(port, ["guess", "reflect"], node / "victim")
    for attack in ("guess", "reflect"):
        rc, out, status = receive_from(node, port)
        assert rc == 5, (attack, out)
        assert "receive: the source did not prove the run's token: refusing everything it would send" in out
        assert status["error"].startswith("the source did not prove the run's token") and status["finished"]
        assert_nothing_outside(node)
        assert not list((node / "hub").rglob("blobs/*"))
    rc, out, err = finish(server)
    assert rc == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["attack"] for r in records] == ["guess", "reflect"]
    for record in records:
        assert record["want"] == sorted(FILES)  # the receiver asked for the manifest's paths and nothing else
        assert record["receiver_proved"] is None  # a stranger cannot tell whether the receiver holds the token


def test_a_sender_with_the_token_is_refused_each_attack_then_the_control_is_taken(node):
    port = free_port()
    server = sender(port, ["esc", "dotdot", "outside", "control"], node / "victim", token=TOKEN)
    victim = node / "victim"
    expected = {
        "esc": f"refusing the link blobs/esc -> {victim}: only the snapshot's links to its own blobs are taken",
        "dotdot": f"refusing blobs/{'../' * 16}{str(victim).lstrip('/')}/pwned-dotdot.txt: not a blob of the manifest",
        "outside": f"refusing snapshots/{REV}/pwned-outside.py: not a blob of the manifest this node asked for",
    }
    for attack, message in expected.items():
        rc, out, status = receive_from(node, port)
        assert rc == 5, (attack, out)
        assert message in status["error"], (attack, status["error"])
        assert f"receive: {message}" in out
        assert_nothing_outside(node)
        assert not list((node / "hub" / FOLDER / "snapshots" / REV).iterdir())  # no link made from a refused copy
    # outside sent the first wanted blob, proven, before its path outside the manifest: that blob alone landed.
    assert every_file(node / "hub") == [f"{FOLDER}/blobs/{MANIFEST['config.json']['blob']}"]
    rc, out, status = receive_from(node, port)
    assert rc == 0, out
    assert status["error"] is None and status["finished"]
    snapshot = node / "hub" / FOLDER / "snapshots" / REV
    for path, text in FILES.items():
        assert (snapshot / path).read_text() == text
    assert_nothing_outside(node)
    rc, out, err = finish(server)
    assert rc == 0, err
    records = {r["attack"]: r for r in map(json.loads, out.splitlines())}
    assert all(r["receiver_proved"] for r in records.values())  # it held the token: the receiver's proof checks
    assert records["esc"]["sent"] == ["blobs/esc", "blobs/esc/pwned.txt"]
    assert records["control"]["want"] == ["model.safetensors"]  # the blob outside landed is linked, not sent again


def test_the_probe_gets_no_byte_from_a_serve_that_does_not_list_it_and_the_challenge_when_listed(tmp_path):
    source = tmp_path / "source"
    (source / "state").mkdir(parents=True)
    (source / "state" / "manifest.json").write_text(json.dumps(MANIFEST))
    (source / "state" / "fanout.token").write_text(TOKEN + "\n")
    (source / "state" / "fanout.token").chmod(0o600)
    folder = source / "hub" / FOLDER
    (folder / "blobs").mkdir(parents=True)
    (folder / "snapshots" / REV).mkdir(parents=True)
    for path, text in FILES.items():
        (folder / "blobs" / MANIFEST[path]["blob"]).write_text(text)
        os.symlink(f"../../blobs/{MANIFEST[path]['blob']}", folder / "snapshots" / REV / path)
    port = free_port()
    serve = transfer(source, "serve", "--bind=127.0.0.1", f"--port={port}", "--allow=127.0.0.2", "--peers=2")
    rc, out, err = finish(hostile("probe", "--host=127.0.0.1", f"--port={port}", "--timeout=10"))
    assert rc == 0, err
    refused = json.loads(out)
    assert refused["connected"] and refused["received_bytes"] == 0 and refused["ended"] in ("eof", "reset")
    # Listed (127.0.0.2 is the probe's address here), it gets the challenge: the probe does see bytes when sent.
    serve.kill()
    _rc, served, _err = finish(serve)
    assert "refused 127.0.0.1: not one of the peers 127.0.0.2" in served
    port = free_port()
    serve = transfer(source, "serve", "--bind=127.0.0.1", f"--port={port}", "--allow=127.0.0.1", "--peers=1")
    rc, out, err = finish(hostile("probe", "--host=127.0.0.1", f"--port={port}", "--timeout=10"))
    listed = json.loads(out)
    assert listed["received_bytes"] > 0 and listed["first"].startswith('{"nonce": ')
    assert all(text not in listed["first"] for text in FILES.values())  # no blob without a proof
    serve.kill()
    _rc, served, _err = finish(serve)
    assert "refused 127.0.0.1: it did not prove the run's token" in served
