# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Model weights on a node: what a complete snapshot is, checked from plain data (no filesystem here).

A snapshot is complete when config.json is there, every shard named in model.safetensors.index.json is there with
the size the hub reported for it (the manifest the fetch recorded from the hub's tree listing), and the model's
cache folder holds no partial download (``*.incomplete``). The module ``weights_complete`` walks the node and hands
what it saw to :func:`check_snapshot`.
"""

from __future__ import annotations

import hashlib
import json

INDEX_FILE = "model.safetensors.index.json"
CONFIG_FILE = "config.json"
PARTIAL_SUFFIXES = (".incomplete", ".part")


def repo_folder(repo_id):
    """``models--<org>--<name>``: huggingface_hub's cache folder of a model repository."""
    return "models--" + repo_id.replace("/", "--")


def manifest_from_tree(entries):
    """{path: {"size", "blob"}} from tree entries as the hub lists them (``lfs.oid`` names LFS blobs, else ``oid``)."""
    manifest = {}
    for entry in entries:
        if entry.get("type", "file") != "file":
            continue
        lfs = entry.get("lfs") or {}
        manifest[entry["path"]] = {"size": int(entry["size"]), "blob": lfs.get("oid") or entry.get("oid")}
    return dict(sorted(manifest.items()))


def index_shards(index_text):
    """The shard files named by a safetensors index, sorted; raises ValueError on an unreadable index."""
    try:
        weight_map = json.loads(index_text)["weight_map"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{INDEX_FILE} is not a safetensors index ({exc})") from exc
    return sorted(set(weight_map.values()))


def fingerprint(observed):
    """A digest of {path: size} so nodes can be compared without shipping their listings around."""
    text = json.dumps(dict(sorted(observed.items())), separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def check_snapshot(node, snapshot_path, observed, index_text, manifest, partial_files):
    """Problems of one node's snapshot.

    observed: {relative path: size in bytes} of the files the snapshot resolves to (None when the snapshot folder is
    missing); index_text: the index's text or None; manifest: {path: {"size"}} as the hub reported it, or None when
    no fetch recorded one; partial_files: paths of partial downloads found in the model's cache folder.
    Returns {"complete", "missing", "wrong_size", "partial", "problems", "msg"}.
    """
    missing, wrong_size, problems = [], [], []
    if observed is None:
        msg = (
            f"{node}: no snapshot at {snapshot_path}: the model was never fetched here; run the model_weights role "
            "(it fetches on one node and copies to the others)"
        )
        return {
            "complete": False,
            "missing": [CONFIG_FILE],
            "wrong_size": [],
            "partial": sorted(partial_files),
            "problems": [msg],
            "msg": msg,
        }
    expected = [CONFIG_FILE]
    if index_text is None:
        missing.append(INDEX_FILE)
    else:
        expected.append(INDEX_FILE)
        try:
            expected.extend(index_shards(index_text))
        except ValueError as exc:
            problems.append(f"{node}: {exc}")
    for path in expected:
        if path not in observed:
            missing.append(path)
            continue
        want = (manifest or {}).get(path, {}).get("size")
        if want is not None and observed[path] != want:
            wrong_size.append(f"{path} ({observed[path]} bytes, the hub reported {want})")
    if manifest is None:
        problems.append(
            f"{node}: no hub manifest recorded for {snapshot_path}: sizes cannot be checked; re-run the fetch"
        )
    if missing:
        problems.append(f"{node}: missing from {snapshot_path}: {', '.join(sorted(missing))}")
    if wrong_size:
        problems.append(f"{node}: wrong size in {snapshot_path}: {', '.join(wrong_size)}")
    if partial_files:
        problems.append(f"{node}: partial downloads left: {', '.join(sorted(partial_files))}")
    msg = "; ".join(problems) if problems else f"{node}: {snapshot_path} complete ({len(expected)} files checked)"
    if problems:
        msg += ". Fix: run the model_weights role again (it resumes what is missing and copies from a complete node)"
    return {
        "complete": not problems,
        "missing": sorted(missing),
        "wrong_size": wrong_size,
        "partial": sorted(partial_files),
        "problems": problems,
        "msg": msg,
    }
