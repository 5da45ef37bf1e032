# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The hub's listing of a revision as the manifest the fetch records: each path's size, blob and content digest."""

from __future__ import annotations

import re

_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")

SHA1_RE = re.compile(r"^[0-9a-f]{40}\Z")


def repo_folder(repo_id):
    """``models--<org>--<name>``: huggingface_hub's cache folder of a model repository."""
    return "models--" + repo_id.replace("/", "--")


def manifest_from_tree(entries):
    """{path: {"size", "blob", "sha256" | "git_oid"}} from tree entries as the hub lists them.

    An LFS file's ``lfs.oid`` is the sha256 of its content and the name of its blob; any other file's ``oid`` is the
    git blob sha1 of its content and the name of its blob (an LFS file's own ``oid`` is that of its pointer file,
    which says nothing about the content on disk, so it is not kept).
    """
    manifest = {}
    for entry in entries:
        if entry.get("type", "file") != "file":
            continue
        lfs = entry.get("lfs") or {}
        if lfs.get("oid"):
            item = {"size": int(entry["size"]), "blob": lfs["oid"], "sha256": lfs["oid"]}
        else:
            item = {"size": int(entry["size"]), "blob": entry.get("oid"), "git_oid": entry.get("oid")}
        manifest[entry["path"]] = item
    return dict(sorted(manifest.items()))


def tree_entries(repo_files):
    """Tree entries as :func:`manifest_from_tree` reads them, from huggingface_hub's ``RepoFile`` objects.

    A folder (no size) is left out; ``blob_id`` is the git oid, ``lfs.sha256`` an LFS file's content digest.
    """
    return [
        {
            "type": "file",
            "path": f.path,
            "size": f.size,
            "oid": f.blob_id,
            "lfs": {"oid": f.lfs.sha256} if f.lfs else None,
        }
        for f in repo_files
        if getattr(f, "size", None) is not None
    ]


def expected_digests(entry):
    """{"sha256": ...} or {"git_sha1": ...} a manifest entry promises; {} when it promises nothing.

    Manifests written before the digests were recorded carry only the blob name, which huggingface_hub takes from the
    hub's ETag: 64 hex digits are an LFS sha256, 40 a git blob sha1.
    """
    if entry.get("sha256"):
        return {"sha256": entry["sha256"]}
    if entry.get("git_oid"):
        return {"git_sha1": entry["git_oid"]}
    blob = entry.get("blob") or ""
    if _SHA256.match(blob):
        return {"sha256": blob}
    if SHA1_RE.match(blob):
        return {"git_sha1": blob}
    return {}
