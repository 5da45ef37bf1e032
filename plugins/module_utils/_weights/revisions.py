# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Superseded revisions (issue 19): every upgrade to a new revision of a 181 GiB model leaves the old one in the
cache, and the disk fills. Which revisions go is decided here; huggingface_hub's own cache API deletes them
(weights_transfer.py prune), keeping every blob a kept revision still links."""

from __future__ import annotations

import re

from .manifest import SHA1_RE, repo_folder


def revisions_in_use(containers, repo_id):
    """{commit: [container names]} of ``repo_id``'s revisions that a running container has mounted.

    ``containers``: the node's running containers as the Docker API lists them (community.docker.docker_host_info
    with ``verbose_output``): a revision counts when its snapshot folder (``models--<org>--<name>/snapshots/<commit>``)
    is in the container's ``Command`` (the serving units run ``vllm serve <the snapshot>`` with the whole cache
    mounted) or is the ``Source`` of one of its ``Mounts`` (a snapshot folder mounted on its own).
    """
    pattern = re.compile(re.escape(repo_folder(repo_id)) + r"/snapshots/([0-9a-f]{40})(?![0-9a-zA-Z])")
    found = {}
    for container in containers or []:
        names = container.get("Names") or [container.get("Id", "?")[:12]]
        name = str(names[0] if isinstance(names, list) else names).lstrip("/")
        command = container.get("Command") or ""
        texts = [" ".join(map(str, command)) if isinstance(command, list) else str(command)]
        texts += [str(mount.get("Source") or "") for mount in container.get("Mounts") or []]
        for text in texts:
            for commit in pattern.findall(text):
                found.setdefault(commit, set()).add(name)
    return {commit: sorted(names) for commit, names in sorted(found.items())}


def superseded_revisions(revisions, serving, keep, in_use=(), served=None):
    """Which of a model's cached revisions to delete, and why each one stays or goes.

    revisions: {commit: {"refs": [...], "last_modified": epoch}} of the model in the node's cache (huggingface_hub's
    ``CachedRevisionInfo``: its refs, the newest mtime of its blobs); serving: the commit the plan serves; keep: how
    many revisions stay, the served one included (model_weights_keep_revisions, an int >= 1); in_use: commits a
    running container has mounted, or {commit: container names} as :func:`revisions_in_use` gives them; served:
    {commit: epoch} of when the role last saw each one served (the prune's own record), the best sign of which
    revision a rollback goes back to.

    Never deleted: the served revision, one a running container has mounted (both count against ``keep`` and stay
    even beyond it), a snapshot folder whose name is no commit (not the role's). The rest are ranked by when they
    were last served, then by their blobs' mtime (when they were fetched), newest first; the first fill what
    ``keep`` leaves, the others are superseded. A branch ref (``refs/main``) protects nothing: the role serves pinned
    commits from their snapshot path, and huggingface_hub deletes the refs of a deleted revision, so none dangles.
    When the served revision is not in the cache, nothing is deleted (something else is wrong).
    Returns {"keep": [commits kept, served first], "prune": [commits to delete, newest first], "why": {commit: why}}.
    """
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise ValueError(f"keep must be an integer of at least 1 (the served revision), not {keep!r}")
    if not SHA1_RE.match(str(serving)):
        raise ValueError(f"the served revision must be a 40-hex commit, not {serving!r}")
    revisions, served = dict(revisions or {}), dict(served or {})
    in_use = dict(in_use) if isinstance(in_use, dict) else set(in_use or ())
    if serving not in revisions:
        why = {
            commit: f"kept: the served revision {serving} is not in the cache, so nothing is deleted"
            for commit in revisions
        }
        return {"keep": sorted(revisions), "prune": [], "why": why}
    kept, why = [serving], {serving: "kept: the revision the plan serves"}
    for commit in sorted(revisions):
        if commit == serving:
            continue
        if not SHA1_RE.match(commit):
            why[commit] = "left alone: the snapshot folder's name is not a commit"
        elif commit in in_use:
            kept.append(commit)
            names = in_use.get(commit) if isinstance(in_use, dict) else None
            why[commit] = "kept: a running container has it mounted" + (f" ({', '.join(names)})" if names else "")

    def rank(commit):
        return (float(served.get(commit) or 0), float((revisions[commit] or {}).get("last_modified") or 0), commit)

    others = sorted((commit for commit in revisions if commit not in why), key=rank, reverse=True)
    room = max(keep - len(kept), 0)
    for commit in others[:room]:
        kept.append(commit)
        why[commit] = f"kept: one of the {keep} most recently served or fetched (model_weights_keep_revisions)"
    prune = others[room:]
    for commit in prune:
        why[commit] = f"superseded: beyond the {keep} revision(s) model_weights_keep_revisions keeps"
    return {"keep": kept, "prune": prune, "why": why}
