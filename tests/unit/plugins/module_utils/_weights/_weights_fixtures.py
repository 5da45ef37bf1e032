# Copyright: gb10.serving maintainers
# Apache-2.0
"""What the _weights tests share: a two-shard snapshot, its hub manifest and what a node observes of it."""

from __future__ import annotations

import hashlib
import json

from ansible_collections.gb10.serving.plugins.module_utils._weights.snapshot import check_snapshot

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
    return check_snapshot("spark-2", SNAP, files, index, manifest, partial or {}, removed=removed)
