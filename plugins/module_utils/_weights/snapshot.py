# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Is one node's snapshot complete? Every file of the index and the manifest, with the hub's size and content, and
no partial download; and what to remove so that the next fetch gets a bad file again."""

from __future__ import annotations

import json
import os

from .manifest import expected_digests

INDEX_FILE = "model.safetensors.index.json"

CONFIG_FILE = "config.json"

PARTIAL_SUFFIXES = (".incomplete", ".part")


def index_shards(index_text):
    """The shard files named by a safetensors index, sorted; raises ValueError on an unreadable index."""
    try:
        weight_map = json.loads(index_text)["weight_map"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{INDEX_FILE} is not a safetensors index ({exc})") from exc
    return sorted(set(weight_map.values()))


def _short(digest):
    return (digest or "none")[:12]


def partial_blob(path):
    """The blob a partial download file belongs to (``blobs/<blob>.incomplete`` -> ``<blob>``)."""
    name = os.path.basename(path)
    for suffix in PARTIAL_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def overlong_partials(partial_files, manifest):
    """Partial files longer than the blob they stand for: a ranged request for the rest answers 416 forever."""
    sizes = {entry.get("blob"): entry["size"] for entry in (manifest or {}).values()}
    return sorted(
        path
        for path, size in (partial_files or {}).items()
        if partial_blob(path) in sizes and size is not None and size > sizes[partial_blob(path)]
    )


def content_problems(observed, manifest):
    """(wrong_size, wrong_content): manifest paths present with another size, or another content, than the hub's."""
    wrong_size, wrong_content = [], []
    for path, entry in sorted((manifest or {}).items()):
        seen = (observed or {}).get(path)
        if seen is None:
            continue
        if seen["size"] != entry["size"]:
            wrong_size.append(path)
            continue
        for name, want in expected_digests(entry).items():
            have = seen.get(name)
            if have is not None and have != want:
                wrong_content.append(path)
                break
    return wrong_size, wrong_content


def check_snapshot(node, snapshot_path, observed, index_text, manifest, partial_files, removed=False):
    """Problems of one node's snapshot.

    observed: {relative path: {"size", "sha256", "git_sha1"}} of the files the snapshot resolves to, the digests of
    a file only where its size is the hub's (None when the snapshot folder is missing); index_text: the index's text
    or None; manifest: {path: {"size", "blob", "sha256" | "git_oid"}} as the hub reported it, or None when no fetch
    recorded one; partial_files: {path: size} of partial downloads found in the model's cache folder; removed: whether
    the bad files and over-long partials are being removed (False in check mode).
    Returns {"complete", "missing", "wrong_size", "wrong_content", "bad", "discard", "partial", "problems",
    "repairs" (the problems that removing fixes), "msg"}:
    ``bad`` are the manifest paths to remove so that the next fetch gets them again, ``discard`` the partial files to
    remove because a resumed request can never complete them.
    """
    partial_files = dict(partial_files or {})
    if observed is None:
        msg = (
            f"{node}: no snapshot at {snapshot_path}: the model was never fetched here; run the model_weights role "
            "(it fetches on one node and copies to the others)"
        )
        return {
            "complete": False,
            "missing": [CONFIG_FILE],
            "wrong_size": [],
            "wrong_content": [],
            "bad": [],
            "discard": overlong_partials(partial_files, manifest),
            "partial": sorted(partial_files),
            "problems": [msg],
            "repairs": [],
            "msg": msg,
        }
    missing, problems = [], []
    expected = [CONFIG_FILE]
    if index_text is None:
        missing.append(INDEX_FILE)
    else:
        expected.append(INDEX_FILE)
        try:
            expected.extend(index_shards(index_text))
        except ValueError as exc:
            problems.append(f"{node}: {exc}")
    expected = sorted(set(expected) | set(manifest or {}))
    missing.extend(path for path in expected if path not in observed)
    wrong_size, wrong_content = content_problems(observed, manifest)
    unproven = sorted(
        path
        for path, entry in (manifest or {}).items()
        if path in observed
        and path not in wrong_size
        and (not expected_digests(entry) or any(name not in observed[path] for name in expected_digests(entry)))
    )
    discard = overlong_partials(partial_files, manifest)
    verb = "removed" if removed else "to remove"
    if manifest is None:
        problems.append(
            f"{node}: no hub manifest recorded for {snapshot_path}: sizes and content cannot be checked; "
            "re-run the fetch"
        )
    if missing:
        problems.append(f"{node}: missing from {snapshot_path}: {', '.join(sorted(set(missing)))}")
    sizes = [f"{p} ({observed[p]['size']} bytes, the hub reported {manifest[p]['size']})" for p in wrong_size]
    repairs = []
    if wrong_size:
        repairs.append(f"{node}: wrong size in {snapshot_path} ({verb}): {', '.join(sizes)}")
    if wrong_content:
        listed = ", ".join(
            f"{p} ({name} {_short(observed[p].get(name))}, the hub's {_short(want)})"
            for p in wrong_content
            for name, want in expected_digests(manifest[p]).items()
        )
        repairs.append(f"{node}: content differs from the hub's in {snapshot_path} ({verb}): {listed}")
    if unproven:
        problems.append(
            f"{node}: content not proven for {', '.join(unproven)} (no digest to compare): re-run the fetch"
        )
    if discard:
        repairs.append(
            f"{node}: partial downloads longer than their file ({verb}, a resumed request cannot finish them): "
            f"{', '.join(discard)}"
        )
    problems.extend(repairs)
    kept = sorted(set(partial_files) - set(discard))
    if kept:
        problems.append(f"{node}: partial downloads left: {', '.join(kept)}")
    msg = "; ".join(problems) if problems else f"{node}: {snapshot_path} complete ({len(expected)} files proven)"
    if problems:
        msg += ". Fix: run the model_weights role again (it resumes what is missing and copies from a complete node)"
    return {
        "complete": not problems,
        "missing": sorted(set(missing)),
        "wrong_size": sizes,
        "wrong_content": wrong_content,
        "bad": sorted(set(wrong_size) | set(wrong_content)),
        "discard": discard,
        "partial": sorted(partial_files),
        "problems": problems,
        "repairs": repairs,
        "msg": msg,
    }


def removal_targets(folder, snapshot, bad, manifest, resolved):
    """The paths to unlink so that the next fetch gets ``bad`` again.

    The snapshot's entry, the model's ``blobs/<blob>`` entry (a file, or a link into a shared blob store) and the
    file the snapshot resolved to when it lies in the model's own folder. A shared store's file outside the model's
    folder is left alone: other repositories may link it, and with the links gone this model no longer reads it.
    """
    targets = []
    folder_real = os.path.realpath(folder)
    for path in sorted(bad):
        targets.append(os.path.join(snapshot, path))
        blob = (manifest or {}).get(path, {}).get("blob")
        if blob:
            targets.append(os.path.join(folder, "blobs", blob))
        real = (resolved or {}).get(path)
        if real and os.path.realpath(real).startswith(folder_real + os.sep):
            targets.append(real)
    return list(dict.fromkeys(targets))
