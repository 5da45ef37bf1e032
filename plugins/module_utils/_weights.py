# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Model weights on a node: what a complete snapshot is, proven by content.

A snapshot is complete when config.json, the safetensors index, every shard it names and every other file of the
manifest (what the fetch recorded from the hub's tree listing) are there with the hub's size AND the hub's content:
the sha256 of an LFS file (``lfs.oid`` in the tree, the name huggingface_hub gives its blob), the git blob sha1 of
any other file (``oid``). The model's cache folder must hold no partial download (``*.incomplete``).

Hashing 181 GiB takes minutes, so it is incremental: a JSON cache keyed by the blob's path under the Hugging Face
cache root remembers size, mtime_ns, ctime_ns and the digests, and a file is hashed again only when one of them
moved (a write that restores the mtime still moves ctime). The module ``weights_complete`` and the transfer script
of the model_weights role share that cache, so a blob the fetch or the copy has just hashed is not hashed again.

That script runs in the serving image, where the collection is not installed: the role copies this file next to it
and it imports it from there. So this file imports the standard library only.
"""

from __future__ import annotations

import hashlib
import json
import os
import re

INDEX_FILE = "model.safetensors.index.json"
CONFIG_FILE = "config.json"
PARTIAL_SUFFIXES = (".incomplete", ".part")
HASH_CACHE_VERSION = 1
_CHUNK = 8 << 20
_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
_SHA1 = re.compile(r"^[0-9a-f]{40}\Z")


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
    if _SHA1.match(blob):
        return {"git_sha1": blob}
    return {}


class Hasher:
    """sha256, and the git blob sha1 (``blob <size>\\0`` + content) when ``git``, of bytes as they pass."""

    def __init__(self, size, git=False):
        self.sha256 = hashlib.sha256()
        self.sha1 = hashlib.sha1(b"blob %d\0" % size) if git else None

    def update(self, chunk):
        self.sha256.update(chunk)
        if self.sha1 is not None:
            self.sha1.update(chunk)

    def digests(self):
        found = {"sha256": self.sha256.hexdigest()}
        if self.sha1 is not None:
            found["git_sha1"] = self.sha1.hexdigest()
        return found


def hash_file(path, size, git=False):
    """{"sha256"} of a file, and its git blob sha1 when ``git``."""
    hasher = Hasher(size, git)
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            hasher.update(chunk)
    return hasher.digests()


def stat_key(stat):
    """What must not move for a remembered digest to stand: size, mtime_ns, ctime_ns."""
    return {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "ctime_ns": stat.st_ctime_ns}


def cached_digests(cache, key, stat, want_git=False):
    """The remembered digests of ``key`` when its file has not changed since, else None."""
    entry = (cache or {}).get(key)
    if not entry or any(entry.get(name) != value for name, value in stat_key(stat).items()):
        return None
    if "sha256" not in entry or (want_git and "git_sha1" not in entry):
        return None
    return {name: entry[name] for name in ("sha256", "git_sha1") if name in entry}


def remember(cache, key, stat, digests):
    """``cache`` with the digests of ``key`` as its file is now."""
    cache[key] = {**stat_key(stat), **digests}
    return cache


def load_hash_cache(text):
    """The entries of a hash cache file; a cache of another version or unreadable starts empty."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(data, dict) or data.get("version") != HASH_CACHE_VERSION:
        return {}
    return dict(data.get("files") or {})


def dump_hash_cache(entries):
    return json.dumps({"version": HASH_CACHE_VERSION, "files": dict(sorted(entries.items()))}, indent=0)


def cache_key(root, real_path):
    """The cache's key of a blob: its real path under the cache root (the same on the host and in a container)."""
    relative = os.path.relpath(real_path, root)
    return real_path if relative.startswith(os.pardir) else relative


def index_shards(index_text):
    """The shard files named by a safetensors index, sorted; raises ValueError on an unreadable index."""
    try:
        weight_map = json.loads(index_text)["weight_map"]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{INDEX_FILE} is not a safetensors index ({exc})") from exc
    return sorted(set(weight_map.values()))


def fingerprint(observed):
    """A digest of {path: sha256} so nodes can be compared by content without shipping their listings around.

    ``observed`` maps paths to their digests ({"sha256", ...}) or, for callers that only have sizes, to sizes.
    """
    flat = {p: (v.get("sha256") if isinstance(v, dict) else v) for p, v in observed.items()}
    text = json.dumps(dict(sorted(flat.items())), separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


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


GIB = 1024**3


def disk_shortfall(where, free, missing, reserve_gib):
    """None when ``missing`` bytes plus ``reserve_gib`` fit in ``free`` bytes (or nothing is missing); else why not,
    with the numbers and the fix. ``where`` names the cache and its disk, e.g. ``spark-2: /srv/hf (on /)``."""
    free, missing = int(free), max(int(missing), 0)
    need = missing + int(float(reserve_gib) * GIB)
    if missing == 0 or free >= need:
        return None
    return (
        f"{where} has {free / GIB:.1f} GiB free, the weights still need {missing / GIB:.1f} GiB plus the "
        f"{float(reserve_gib):g} GiB reserve = {need / GIB:.1f} GiB. Fix: free {(need - free) / GIB:.1f} GiB there, "
        "move the cache (gb10_hf_cache_dir) to a larger disk, or lower model_weights_disk_reserve_gib"
    )


def format_size(num):
    return f"{num / 1048576:.1f} MiB"


def format_duration(seconds):
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    if seconds >= 60:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds} s"


def progress_round(node, phase, status, node_now, round_no, rounds, interval_s, stale_s, container):
    """One round of the progress loop; see :func:`_progress_round`. The line of a round that went wrong is its error."""
    report = _progress_round(node, phase, status, node_now, round_no, rounds, interval_s, stale_s, container)
    report.setdefault("msg", report["error"])
    return report


def _progress_round(node, phase, status, node_now, round_no, rounds, interval_s, stale_s, container):
    """One round of the progress loop, from the status file the transfer script writes.

    status: the parsed file or None (not written yet); node_now: the node's clock when it was read (the script
    writes its own clock, the same kernel's, into ``time``). Returns {"ended", "finished", "error", "msg",
    "bytes_done", "bytes_total", "rate", "eta_s"}: ``ended`` stops the loop; ``error`` (None, or what went wrong
    with node, numbers and fix) is for the task after the loop to fail with: a failed loop item would leave the
    task's own message at "One or more items failed".
    """
    where = f"round {round_no} of {rounds}"
    result = {"ended": False, "finished": False, "error": None, "bytes_done": 0, "bytes_total": 0}
    result.update(rate=None, eta_s=None)
    if status is None:
        waited = round_no * interval_s
        if waited > stale_s:
            return {
                **result,
                "ended": True,
                "error": (
                    f"{node}: the {phase} wrote no progress in {waited:.0f} s (model_weights_progress_stale_s "
                    f"{stale_s:g}): the container {container} did not start its script; see docker logs {container}"
                ),
            }
        return {**result, "msg": f"{node} {phase}: waiting for the first progress report, {where}"}
    done, total = int(status.get("bytes_done") or 0), int(status.get("bytes_total") or 0)
    result.update(bytes_done=done, bytes_total=total)
    started, first = status.get("started"), status.get("bytes_at_start")
    if started is not None and first is not None and status.get("time", 0) > started:
        result["rate"] = max(done - int(first), 0) / (status["time"] - started)
        if result["rate"] > 0 and total > done:
            result["eta_s"] = (total - done) / result["rate"]
    line = f"{node} {phase}: {format_size(done)} of {format_size(total)} ({100.0 * done / max(total, 1):.1f}%)"
    if result["rate"] is not None:
        line += f", {format_size(result['rate'])}/s"
    if result["eta_s"] is not None:
        line += f", ETA {format_duration(result['eta_s'])}"
    if status.get("finished"):
        if status.get("error"):
            return {
                **result,
                "ended": True,
                "error": (
                    f"{node}: the {phase} failed: {status['error']}. Partial files are kept: fix the cause and run "
                    "the role again to resume"
                ),
            }
        return {**result, "ended": True, "finished": True, "msg": f"{line}, done"}
    silent = node_now - float(status.get("time") or 0)
    if silent > stale_s:
        return {
            **result,
            "ended": True,
            "error": (
                f"{node}: the {phase} stopped reporting {silent:.0f} s ago at {format_size(done)} of "
                f"{format_size(total)} (model_weights_progress_stale_s {stale_s:g}): the container {container} died "
                f"or hangs; see docker logs {container}. Partial files are kept: run the role again to resume"
            ),
        }
    return {**result, "msg": f"{line}, {where}"}


# Superseded revisions (issue 19): every upgrade to a new revision of a 181 GiB model leaves the old one in the
# cache, and the disk fills. Which revisions go is decided here; huggingface_hub's own cache API deletes them
# (weights_transfer.py prune), keeping every blob a kept revision still links.


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
    if not _SHA1.match(str(serving)):
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
        if not _SHA1.match(commit):
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
