#!/usr/bin/env python
"""Runs inside a throwaway container of the serving image (managed by the gb10.serving model_weights role).

  fetch    download one pinned revision from the hub into the mounted Hugging Face cache with the image's own
           huggingface_hub, resuming across failed calls, prove every blob by content (sha256 of an LFS file, git
           blob sha1 of any other, as the hub's tree lists them) and record the hub's listing (the manifest)
  serve    on the node that has the snapshot: stream the blobs another node lacks over the fabric, to the listed
           peer addresses only, after both ends proved the run's token
  receive  on another node: take the blobs it lacks, each proven by content as it lands, and link them into the
           snapshot; only the paths of the manifest the role wrote here, only the Hugging Face layout's links
  prune    once the pinned revision serves: delete the model's superseded revisions with huggingface_hub's own
           cache API (scan_cache_dir, delete_revisions, execute: a blob a kept revision links stays), never the
           served one or one a running container has mounted (--in-use); --dry-run only says what would go

serve and receive with ``--layout files --root <folder>`` move plain files instead (the flashinfer_jit role's
prebuilt module: its cache folder's files): the manifest maps a path under the folder to its size, sha256 and
mtime_ns; the receiver takes only those paths, proves each sha256, gives it the manifest's mtime (ninja compares
outputs with inputs by mtime: a fresh one on an output would relink it, a fresh one on a generated source would
rebuild every unit) and renames the proven files into place once all of them are proven, the names given with
``--commit-last`` (the stamp) after the others, so a copy cut short leaves no stamp.

The hub token is read from the root-only env file mounted at --env-file and passed to huggingface_hub as an
argument: it is never in this process's argv or in the container's configuration. The fan-out's per-run token is
read from --token-file (mode 0600) and never crosses the wire: each end proves it with an HMAC of the other's
nonce. Progress goes to --status (JSON: phase, bytes_done, bytes_total, error, time) at least every few seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import socket
import stat
import sys
import tarfile
import threading
import time

# The serving image has no collection to import from: the role copies the package plugins/module_utils/_weights/ next
# to this script, into the folder the container mounts, so the content rules are the package's own. Run from the
# role's files/ (a checkout, the unit tests), the collection's copy beside the role serves.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
sys.path.append(os.path.join(_HERE, os.pardir, os.pardir, os.pardir, "plugins", "module_utils"))

from _weights.disk import disk_shortfall
from _weights.hash_cache import cache_key, cached_digests, dump_hash_cache, load_hash_cache, remember
from _weights.hashing import Hasher, hash_file
from _weights.manifest import expected_digests, manifest_from_tree, tree_entries
from _weights.manifest import repo_folder as _repo_folder
from _weights.revisions import superseded_revisions

CACHE = os.environ.get("GB10_HF_HUB_CACHE", "/root/.cache/huggingface/hub")
LINE_LIMIT = 16 << 20  # a handshake line (the list of wanted paths) longer than this is refused
PRUNE_MARK = "GB10-PRUNE "  # the prune's one result line (the role reads it from the container's output)


class Refused(Exception):
    """What the other end sent, or the state found, is not accepted; nothing of it was written."""


def repo_folder(repo_id):
    return os.path.join(CACHE, _repo_folder(repo_id))


class Status:
    """The status file the role polls. The reporter thread and the final write share one temporary file, so they
    take turns; once the final status is written no progress write may replace it (the role would wait on)."""

    def __init__(self, path, phase, total=0):
        self.path, self.phase, self.total, self.error = path, phase, total, None
        self.done_fn = lambda: 0
        self.started, self.bytes_at_start = time.time(), None
        self._lock = threading.Lock()
        self._finished = False

    def write(self, final=False):
        with self._lock:
            if self._finished:
                return
            done = self.done_fn()
            if self.bytes_at_start is None:
                self.bytes_at_start = done  # what a resumed run found: the rate counts only what it moves
            data = {
                "phase": self.phase,
                "bytes_done": done,
                "bytes_total": self.total,
                "started": self.started,
                "bytes_at_start": self.bytes_at_start,
                "error": self.error,
                "finished": final,
                "time": time.time(),
            }
            tmp = self.path + ".tmp"
            with open(tmp, "w") as handle:
                json.dump(data, handle)
            os.replace(tmp, self.path)
            self._finished = final

    def run_reporter(self, interval=3.0):
        def loop():
            while True:
                self.write()
                time.sleep(interval)

        threading.Thread(target=loop, daemon=True).start()


def read_token(env_file):
    if not env_file or not os.path.exists(env_file):
        return None
    with open(env_file) as handle:
        for line in handle:
            key, _eq, value = line.strip().partition("=")
            if key == "HF_TOKEN" and value:
                return value
    return None


def read_run_token(path):
    """The fan-out's per-run token, from a regular file only root may read (mode 0600)."""
    if not path:
        raise Refused("no --token-file: the fan-out needs the run's token (the role writes it)")
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode) or info.st_mode & 0o077:
        raise Refused(f"{path} must be a regular file of mode 0600 (it is {stat.filemode(info.st_mode)})")
    with open(path) as handle:
        token = handle.read().strip()
    if len(token) < 16:
        raise Refused(f"{path} holds no token of at least 16 characters")
    return token


def blob_bytes(folder, manifest):
    """Bytes present of the manifest's blobs, partial blobs included."""
    total = 0
    for entry in manifest.values():
        for name in (entry["blob"], entry["blob"] + ".incomplete"):
            try:
                total += os.path.getsize(os.path.join(folder, "blobs", name))
                break
            except OSError:  # absent, or the partial file was renamed to its blob between two looks
                continue
    return total


def missing_bytes(folder, manifest):
    """Bytes the fetch still has to write: each blob of the manifest not in ``blobs/`` yet, less its partial file.

    A blob another revision of the model already brought is there (the same name, the same content), so an upgrade
    that changes a few files needs room for those files only."""
    missing = 0
    for entry in {e["blob"]: e for e in manifest.values()}.values():
        blob = os.path.join(folder, "blobs", entry["blob"])
        if os.path.lexists(blob):
            continue
        partial = blob + ".incomplete"
        have = os.path.getsize(partial) if os.path.isfile(partial) and not os.path.islink(partial) else 0
        missing += entry["size"] - have if have <= entry["size"] else entry["size"]
    return missing


def no_room(args, missing):
    """Why ``missing`` bytes do not fit on the cache's disk with ``--reserve-gib`` kept free (None when they fit, or
    without --reserve-gib): measured here, right before writing, whatever ran since the role's preflight took."""
    if args.reserve_gib is None:
        return None
    where, probe = args.host_cache_dir or os.path.dirname(CACHE), CACHE
    while not os.path.isdir(probe) and os.path.dirname(probe) != probe:  # hub/ is made by the first fetch
        probe = os.path.dirname(probe)
    return disk_shortfall(where, shutil.disk_usage(probe).free, missing, args.reserve_gib)


class HashCache:
    """The role's hash cache: digests by the blob's real path under the cache root, valid while size, mtime and
    ctime stand. Shared with the weights_complete module, so what this run hashed is not hashed again there."""

    def __init__(self, path):
        self.path, self.root, self.files = path, os.path.realpath(os.path.dirname(CACHE)), {}
        if path and os.path.isfile(path):
            try:
                with open(path) as handle:
                    self.files = load_hash_cache(handle.read())
            except (OSError, ValueError):  # unreadable, or files that are no mapping: start empty
                self.files = {}

    def key(self, real):
        return cache_key(self.root, real)

    def digests(self, path, size, git):
        """The digests of the file at ``path`` (links followed): remembered when unchanged, else hashed now."""
        real = os.path.realpath(path)
        info = os.stat(real)
        found = cached_digests(self.files, self.key(real), info, want_git=git)
        if found is None:
            found = hash_file(real, size, git)
            self.remember(real, found, info)  # as it was before the read: a change meanwhile shows next time
        return found

    def remember(self, path, digests, info=None):
        real = os.path.realpath(path)
        remember(self.files, self.key(real), info or os.stat(real), digests)

    def forget(self, path):
        """The digests remembered for ``path``, dropped from the cache (the file is about to be renamed)."""
        entry = self.files.pop(self.key(os.path.realpath(path)), {})
        return {k: entry[k] for k in ("sha256", "git_sha1") if k in entry}

    def save(self):
        if not self.path:
            return
        files = {k: v for k, v in self.files.items() if os.path.exists(os.path.join(self.root, k))}
        tmp = self.path + ".tmp"
        with open(tmp, "w") as handle:
            handle.write(dump_hash_cache(files))
        os.chmod(tmp, 0o600)
        os.replace(tmp, self.path)


def content_mismatch(path, entry, cache):
    """Why the file at ``path`` is not the manifest's ``entry`` (size or digest), or None when it is."""
    try:
        size = os.path.getsize(path)
    except OSError:
        return "missing"
    if size != entry["size"]:
        return f"{size} bytes, the hub reported {entry['size']}"
    want = expected_digests(entry)
    if not want:
        return "the manifest has no digest to prove it"
    have = cache.digests(path, size, git="git_sha1" in want)
    for name, digest in want.items():
        if have.get(name) != digest:
            return f"{name} {have.get(name)}, the hub's {digest}"
    return None


def safe_path(path):
    """A manifest path as a relative path that stays where it is joined (no absolute, no '..', no empty part)."""
    parts = path.split("/")
    if not path or path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in parts):
        raise Refused(f"refusing the path {path!r}: not a plain relative path")
    return path


def hf_link(path, blob):
    """The link huggingface_hub puts at snapshots/<rev>/<path>: relative, to ../../blobs/<blob> (deeper paths climb
    further)."""
    return os.path.relpath(os.path.join("blobs", blob), os.path.join("snapshots", "rev", os.path.dirname(path)))


def load_manifest(path):
    with open(path) as handle:
        manifest = json.load(handle)
    for name, entry in manifest.items():
        safe_path(name)
        if not re.match(r"^[0-9a-f]{40,64}$", str(entry.get("blob") or "")):
            raise Refused(f"refusing the manifest {path}: {name} names the blob {entry.get('blob')!r}")
    return manifest


def under(path, folder):
    """Whether ``path``, links resolved, lies inside ``folder`` (links resolved too)."""
    real, top = os.path.realpath(path), os.path.realpath(folder)
    return real == top or real.startswith(top + os.sep)


def fetch(args):
    from huggingface_hub import HfApi, hf_hub_url, snapshot_download
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError
    from huggingface_hub.file_download import http_get
    from huggingface_hub.utils import build_hf_headers

    token = read_token(args.env_file)
    status = Status(args.status, "fetch")
    api = HfApi(endpoint=args.endpoint, token=token)
    try:
        info = api.model_info(args.repo, revision=args.revision)
        entries = tree_entries(api.list_repo_tree(args.repo, revision=args.revision, recursive=True))
    except RevisionNotFoundError:
        status.error = f"the hub {args.endpoint} has no revision {args.revision} of {args.repo}"
        status.write(final=True)
        print(status.error, file=sys.stderr)
        return 3
    except RepositoryNotFoundError:
        status.error = f"the hub {args.endpoint} has no repository {args.repo} (or the token may not read it)"
        status.write(final=True)
        print(status.error, file=sys.stderr)
        return 3
    if info.sha != args.revision:
        status.error = f"{args.revision} resolves to {info.sha} on the hub: pin the profile's revision to a commit"
        status.write(final=True)
        return 3
    manifest = manifest_from_tree(entries)
    for path in manifest:
        safe_path(path)
    folder = repo_folder(args.repo)
    os.makedirs(os.path.join(folder, "blobs"), exist_ok=True)
    status.total = sum(e["size"] for e in manifest.values())
    short = no_room(args, missing_bytes(folder, manifest))
    if short:
        status.error = short
        status.write(final=True)
        print(short, file=sys.stderr)
        return 6
    cache = HashCache(args.hash_cache)
    status.done_fn = lambda: blob_bytes(folder, manifest)
    status.run_reporter()
    headers = build_hf_headers(token=token)
    # huggingface_hub resumes a dropped connection within one call, but deletes its partial file when the call
    # fails. So each blob is first brought in with the client's own ranged http_get into a partial file this script
    # keeps across failed calls and attempts; snapshot_download then finds every blob and only links the snapshot.
    # Every blob, found or fetched, is proven by content before it counts.
    by_blob = {}
    for path, entry in sorted(manifest.items()):
        by_blob.setdefault(entry["blob"], (path, entry))
    for blob_name, (path, entry) in sorted(by_blob.items(), key=lambda item: item[1][0]):
        blob = os.path.join(folder, "blobs", blob_name)
        if os.path.lexists(blob):
            wrong = content_mismatch(blob, entry, cache)
            if wrong is None:
                continue
            print(f"{path}: the blob here is not the hub's ({wrong}); removed, fetching it again", flush=True)
            os.unlink(blob)  # a link into a shared blob store goes, the store's file stays
        partial = blob + ".incomplete"
        if os.path.lexists(partial) and (os.path.islink(partial) or os.path.getsize(partial) > entry["size"]):
            print(f"{path}: partial file longer than the hub's {entry['size']} bytes; discarded", flush=True)
            os.unlink(partial)  # a ranged request for the rest of it would answer 416 on every run
        url = hf_hub_url(args.repo, path, revision=args.revision, endpoint=args.endpoint)
        last = None
        for attempt in range(1, args.attempts + 1):
            with open(partial, "ab") as handle:
                have = handle.tell()
                try:
                    if have < entry["size"]:
                        http_get(url, handle, resume_size=have, headers=headers, expected_size=entry["size"])
                except Exception as exc:
                    last = f"the last stopped at {handle.tell()} bytes ({exc}); the partial file is kept to resume"
                    print(f"{path}: attempt {attempt} stopped at {handle.tell()} bytes ({exc}); retrying", flush=True)
                    time.sleep(min(2 * attempt, 30))
                    continue
            wrong = content_mismatch(partial, entry, cache)
            if wrong is None:
                proven = cache.forget(partial)
                os.replace(partial, blob)
                cache.remember(blob, proven)  # the rename moved ctime: remember the blob as it now stands
                break
            last = f"the last brought content that is not the hub's ({wrong}); check the hub endpoint and the link"
            print(f"{path}: attempt {attempt} brought content that is not the hub's ({wrong}); again", flush=True)
            os.unlink(partial)
            time.sleep(min(2 * attempt, 30))
        else:
            cache.save()
            status.error = f"{path}: {args.attempts} attempts failed; {last}"
            status.write(final=True)
            return 4
    cache.save()
    snapshot = snapshot_download(
        args.repo,
        revision=args.revision,
        cache_dir=CACHE,
        token=token,
        endpoint=args.endpoint,
        max_workers=args.workers,
    )
    with open(args.manifest + ".tmp", "w") as handle:
        json.dump(manifest, handle, indent=1)
    os.replace(args.manifest + ".tmp", args.manifest)
    status.write(final=True)
    print(json.dumps({"snapshot": snapshot, "bytes_total": status.total}))
    return 0


def _proof(token, role, nonce):
    return hmac.new(token.encode(), f"gb10-weights:{role}:{nonce}".encode(), hashlib.sha256).hexdigest()


def _read_line(reader):
    line = reader.readline(LINE_LIMIT)
    if not line.endswith(b"\n"):
        raise Refused("the other end closed or sent no complete line")
    try:
        return json.loads(line)
    except ValueError as exc:
        raise Refused(f"the other end sent no JSON line ({exc})") from exc


def _proven(message, expected):
    # Bytes, not str: compare_digest raises TypeError on a str that is not ASCII, which a peer could send.
    return isinstance(message, dict) and hmac.compare_digest(str(message.get("proof", "")).encode(), expected.encode())


def server_handshake(conn, reader, token):
    """The serving side: the peer proves the token on our nonce, then we prove it on the peer's. Returns what the
    peer wants."""
    nonce = secrets.token_hex(16)
    conn.sendall(json.dumps({"nonce": nonce}).encode() + b"\n")
    hello = _read_line(reader)
    if not _proven(hello, _proof(token, "receive", nonce)):
        raise Refused("it did not prove the run's token")
    want = hello.get("want")
    if not isinstance(want, list) or not all(isinstance(path, str) for path in want):
        raise Refused("it sent no list of paths")
    conn.sendall(json.dumps({"proof": _proof(token, "serve", str(hello.get("nonce", "")))}).encode() + b"\n")
    return want


def client_handshake(conn, reader, token, want):
    challenge = _read_line(reader)
    if not isinstance(challenge, dict):
        raise Refused("the source sent no challenge")
    nonce = secrets.token_hex(16)
    proof = _proof(token, "receive", str(challenge.get("nonce", "")))
    conn.sendall(json.dumps({"nonce": nonce, "proof": proof, "want": want}).encode() + b"\n")
    if not _proven(_read_line(reader), _proof(token, "serve", nonce)):
        raise Refused("the source did not prove the run's token: refusing everything it would send")


def send_snapshot(writer, args, manifest, want):
    """A tar stream in the Hugging Face layout: ``blobs/<blob>`` for each wanted blob, then the snapshot's links.

    Blobs are read through the snapshot, wherever its links resolve inside the cache (the model's own blobs, or a
    shared blob store beside it), and sent under the manifest's blob name: the receiver gets the plain layout."""
    snapshot = os.path.join(repo_folder(args.repo), "snapshots", args.revision)
    unknown = sorted(set(want) - set(manifest))
    if unknown:
        raise Refused(f"the peer asked for paths outside the manifest: {', '.join(unknown[:5])}")
    sent = set()
    with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(want):
            entry = manifest[path]
            if entry["blob"] in sent:
                continue
            source = os.path.join(snapshot, safe_path(path))
            if not under(source, CACHE) or not os.path.isfile(source):
                raise Refused(
                    f"{path}: the snapshot here resolves to {os.path.realpath(source)}, not a file of {CACHE}"
                )
            if os.path.getsize(source) != entry["size"]:
                raise Refused(f"{path}: {os.path.getsize(source)} bytes here, the manifest says {entry['size']}")
            member = tarfile.TarInfo(f"blobs/{entry['blob']}")
            member.size, member.mode, member.mtime = entry["size"], 0o644, int(time.time())
            with open(source, "rb") as handle:
                tar.addfile(member, handle)
            sent.add(entry["blob"])
        for path, entry in sorted(manifest.items()):
            link = tarfile.TarInfo(f"snapshots/{args.revision}/{path}")
            link.type, link.linkname, link.mtime = tarfile.SYMTYPE, hf_link(path, entry["blob"]), int(time.time())
            tar.addfile(link)


def serve(args):
    status = Status(args.status, "serve")
    token = read_run_token(args.token_file)
    allowed = {a.strip() for item in args.allow or [] for a in item.split(",") if a.strip()}
    if not allowed:
        raise Refused("serve needs --allow with the receivers' addresses")
    manifest = load_files_manifest(args.manifest) if args.layout == "files" else load_manifest(args.manifest)
    listener = socket.create_server((args.bind, args.port), reuse_port=True)
    listener.settimeout(args.timeout)
    status.write()
    served = 0
    while served < args.peers:
        conn, peer = listener.accept()
        with conn:
            if peer[0] not in allowed:
                print(f"refused {peer[0]}: not one of the peers {', '.join(sorted(allowed))}", flush=True)
                continue
            conn.settimeout(120)
            try:
                with conn.makefile("rb") as reader:
                    want = server_handshake(conn, reader, token)
                with conn.makefile("wb") as writer:
                    (send_files if args.layout == "files" else send_snapshot)(writer, args, manifest, want)
            except (Refused, OSError) as exc:  # one peer that lies, stalls or hangs up does not end the serving
                print(f"refused {peer[0]}: {exc}", flush=True)
                continue
        served += 1
        print(f"served {peer[0]}", flush=True)
    status.write(final=True)
    return 0


def _write_blob(tar, member, target, entry, received, cache):
    """Stream one blob into its partial file, proving it as it lands; only a proven blob takes its name."""
    partial = target + ".incomplete"
    if os.path.lexists(partial):
        os.unlink(partial)  # whatever was there (a link included) is not written through
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    want = expected_digests(entry)
    hasher = Hasher(entry["size"], git="git_sha1" in want)
    with tar.extractfile(member) as src, os.fdopen(fd, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
            hasher.update(chunk)
            received[0] += len(chunk)
    have = hasher.digests()
    for name, digest in want.items():
        if have.get(name) != digest:
            os.unlink(partial)
            raise Refused(f"refusing {member.name}: its {name} is {have.get(name)}, the manifest's {digest}")
    os.replace(partial, target)
    cache.remember(target, have)


def _start_receive(args, status, manifest, have, received):
    """Report progress over the manifest (``have`` already here, ``received`` counts what arrives) and connect to
    the source, trying for up to two minutes while its serve starts."""
    status.total = sum(e["size"] for e in manifest.values())
    present = sum(manifest[p]["size"] for p in have)
    status.done_fn = lambda: present + received[0]
    status.run_reporter()
    deadline = time.time() + min(args.timeout, 120)
    local = (args.local_address, 0) if args.local_address else None
    while True:
        try:
            return socket.create_connection((args.source, args.port), timeout=30, source_address=local)
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(1)


def _receive_inputs(args):
    """The status and the run's token of a receive, once its manifest is known to be there."""
    status = Status(args.status, "receive")
    token = read_run_token(args.token_file)
    if not os.path.isfile(args.manifest):
        raise Refused(f"no manifest at {args.manifest}: the role writes the source node's manifest here first")
    return status, token


def _take_stream(conn, token, want, take):
    """Prove both ends over ``conn``, ask for ``want`` and hand each member of the tar stream the source sends to
    ``take(tar, member)``; the connection is closed however it ends."""
    with conn, conn.makefile("rb") as reader:
        conn.settimeout(120)
        client_handshake(conn, reader, token, want)
        with tarfile.open(fileobj=reader, mode="r|") as tar:
            for member in tar:
                take(tar, member)


def receive(args):
    if args.layout == "files":
        return receive_files(args)
    status, token = _receive_inputs(args)
    manifest = load_manifest(args.manifest)
    folder = repo_folder(args.repo)
    blobs = os.path.join(folder, "blobs")
    snapshot = os.path.join(folder, "snapshots", args.revision)
    # Checked before anything is made: realpath resolves the links of the part that exists.
    if not under(blobs, folder) or not under(snapshot, folder):
        raise Refused(f"{blobs} or {snapshot} leads outside {folder}: remove the link and run again")
    cache = HashCache(args.hash_cache)
    have = {p for p, e in manifest.items() if content_mismatch(os.path.join(snapshot, p), e, cache) is None}
    # A proven blob whose snapshot link went is linked again here, not copied again.
    relink = {
        p
        for p, e in manifest.items()
        if p not in have and content_mismatch(os.path.join(blobs, e["blob"]), e, cache) is None
    }
    have |= relink
    want = sorted(set(manifest) - have)
    wanted_blobs = {manifest[p]["blob"]: manifest[p] for p in want}
    # Every wanted blob is written whole (a blob here that is not proven is replaced): measured before anything is.
    short = no_room(args, sum(e["size"] for e in wanted_blobs.values()))
    if short:
        raise Refused(short)
    os.makedirs(blobs, exist_ok=True)
    os.makedirs(snapshot, exist_ok=True)
    links = {f"snapshots/{args.revision}/{p}": (p, hf_link(p, e["blob"])) for p, e in manifest.items()}
    received = [0]
    conn = _start_receive(args, status, manifest, have, received)
    got = set()

    def take(tar, member):
        if member.isreg():
            blob = member.name[len("blobs/") :] if member.name.startswith("blobs/") else None
            entry = wanted_blobs.get(blob)
            if entry is None or blob in got:
                raise Refused(f"refusing {member.name}: not a blob of the manifest this node asked for")
            if member.size != entry["size"]:
                raise Refused(f"refusing {member.name}: {member.size} bytes, the manifest's {entry['size']}")
            target = os.path.join(blobs, blob)
            if not under(os.path.dirname(target), blobs):
                raise Refused(f"refusing {member.name}: {blobs} leads outside {folder}")
            _write_blob(tar, member, target, entry, received, cache)
            got.add(blob)
        elif member.issym():
            path, link = links.get(member.name, (None, None))
            if path is None or member.linkname != link:
                raise Refused(
                    f"refusing the link {member.name} -> {member.linkname}: only the snapshot's links "
                    "to its own blobs are taken"
                )
        else:
            raise Refused(f"refusing {member.name}: neither a blob nor a snapshot link")

    try:
        _take_stream(conn, token, want, take)
    finally:
        cache.save()
    missing = sorted(b for b in wanted_blobs if b not in got)
    if missing:
        raise Refused(f"the source sent no {', '.join(missing[:5])}: run the role again")
    for path in sorted(set(want) | relink):
        _link(snapshot, path, hf_link(path, manifest[path]["blob"]))
    status.write(final=True)
    return 0


def _link(snapshot, path, link):
    """snapshots/<rev>/<path> -> link, made here from the manifest (never from what the other end sent)."""
    target = os.path.join(snapshot, safe_path(path))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if not under(os.path.dirname(target), snapshot):
        raise Refused(f"{os.path.dirname(target)} leads outside {snapshot}: remove the link and run again")
    tmp = f"{target}.gb10-link"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(link, tmp)
    os.replace(tmp, target)


# ---------------------------------------------------------------------------------------------------------------------
# --layout files: plain files under --root, by a manifest {path: {size, sha256, mtime_ns}}


def load_files_manifest(path):
    with open(path) as handle:
        manifest = json.load(handle)
    if not isinstance(manifest, dict) or not manifest:
        raise Refused(f"refusing the manifest {path}: no files")
    for name, entry in manifest.items():
        safe_path(name)
        if not isinstance(entry, dict) or not re.match(r"^[0-9a-f]{64}$", str(entry.get("sha256") or "")):
            raise Refused(f"refusing the manifest {path}: {name} has no sha256")
        if not isinstance(entry.get("size"), int) or not isinstance(entry.get("mtime_ns"), int):
            raise Refused(f"refusing the manifest {path}: {name} has no size or mtime_ns")
    return manifest


def send_files(writer, args, manifest, want):
    """A tar stream of ``files/<path>`` for each wanted path, read from --root and checked against the manifest's
    size before it is sent (the receiver proves the content)."""
    root = os.path.realpath(args.root)
    unknown = sorted(set(want) - set(manifest))
    if unknown:
        raise Refused(f"the peer asked for paths outside the manifest: {', '.join(unknown[:5])}")
    with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(want):
            entry = manifest[path]
            source = os.path.join(root, safe_path(path))
            if not under(source, root) or not os.path.isfile(source) or os.path.islink(source):
                raise Refused(f"{path}: not a plain file of {root} here")
            if os.path.getsize(source) != entry["size"]:
                raise Refused(f"{path}: {os.path.getsize(source)} bytes here, the manifest says {entry['size']}")
            member = tarfile.TarInfo(f"files/{path}")
            member.size, member.mode, member.mtime = entry["size"], 0o644, entry["mtime_ns"] // 10**9
            with open(source, "rb") as handle:
                tar.addfile(member, handle)


def _write_file(tar, member, partial, entry, received):
    if os.path.lexists(partial):
        os.unlink(partial)  # whatever was there (a link included) is not written through
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    hasher = Hasher(entry["size"])
    with tar.extractfile(member) as src, os.fdopen(fd, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
            hasher.update(chunk)
            received[0] += len(chunk)
    have = hasher.digests()["sha256"]
    if have != entry["sha256"]:
        os.unlink(partial)
        raise Refused(f"refusing {member.name}: its sha256 is {have}, the manifest's {entry['sha256']}")
    os.utime(partial, ns=(entry["mtime_ns"], entry["mtime_ns"]))


def receive_files(args):
    status, token = _receive_inputs(args)
    manifest = load_files_manifest(args.manifest)
    root = os.path.realpath(args.root)
    cache = HashCache(None)
    targets = {}
    for path in manifest:
        target = os.path.join(root, safe_path(path))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not under(os.path.dirname(target), root):
            raise Refused(f"{os.path.dirname(target)} leads outside {root}: remove the link and run again")
        targets[path] = target
    have = {
        p
        for p, e in manifest.items()
        if not os.path.islink(targets[p]) and content_mismatch(targets[p], e, cache) is None
    }
    want = sorted(set(manifest) - have)
    received = [0]
    conn = _start_receive(args, status, manifest, have, received)
    got = set()
    partials = {p: targets[p] + ".gb10-incomplete" for p in want}

    def take(tar, member):
        path = member.name[len("files/") :] if member.name.startswith("files/") else None
        if not member.isreg() or path not in partials or path in got:
            raise Refused(f"refusing {member.name}: not a file of the manifest this node asked for")
        if member.size != manifest[path]["size"]:
            raise Refused(f"refusing {member.name}: {member.size} bytes, the manifest's {manifest[path]['size']}")
        _write_file(tar, member, partials[path], manifest[path], received)
        got.add(path)

    try:
        _take_stream(conn, token, want, take)
        missing = sorted(p for p in want if p not in got)
        if missing:
            raise Refused(f"the source sent no {', '.join(missing[:5])}: run the role again")
    except BaseException:
        for partial in partials.values():
            if os.path.lexists(partial):
                os.unlink(partial)
        raise
    last = set(args.commit_last or [])
    for path in sorted(want, key=lambda p: (os.path.basename(p) in last, p)):
        os.replace(partials[path], targets[path])
    for path in sorted(have):
        # Proven content whose mtime moved (touched, or copied by hand) would still make ninja rebuild.
        if os.stat(targets[path]).st_mtime_ns != manifest[path]["mtime_ns"]:
            os.utime(targets[path], ns=(manifest[path]["mtime_ns"], manifest[path]["mtime_ns"]))
    status.write(final=True)
    print(json.dumps({"received": len(want), "present": len(have), "bytes": received[0]}), flush=True)
    return 0


def _load_served(path):
    """{repo: {commit: epoch}}: when the prune last saw each revision served (its own record, in the state folder)."""
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def prune(args):
    """Delete the superseded revisions of ``--repo`` (``superseded_revisions`` decides) with huggingface_hub's own
    cache API, which keeps every blob a kept revision still links and drops the refs of what it deletes; print one
    ``GB10-PRUNE {json}`` line: what stays and why, what went (or would go), the bytes freed."""
    from huggingface_hub import scan_cache_dir

    result = {"repo": args.repo, "serving": args.revision, "keep": args.keep, "dry_run": args.dry_run}
    result.update(kept=[], pruned=[], why={}, freed_bytes=0, refs={}, warnings=[])
    folder = repo_folder(args.repo)
    if not os.path.isdir(os.path.join(folder, "snapshots")):
        print(PRUNE_MARK + json.dumps(result), flush=True)
        return 0
    info = scan_cache_dir(CACHE)
    repo = next((r for r in info.repos if r.repo_type == "model" and r.repo_id == args.repo), None)
    # A repo the scan found corrupted (a snapshot link to a missing blob, a ref to a missing snapshot) is left out of
    # info.repos: refused with the scan's words, not read as "nothing to delete".
    mine = [str(w) for w in info.warnings if os.path.basename(folder) in str(w)]
    if repo is None:
        raise Refused(
            f"huggingface_hub's scan of {CACHE} does not read {args.repo}: {'; '.join(mine) or 'not found'}. "
            "Nothing was deleted: run the model_weights role (it repairs the serving revision) and look at the rest"
        )
    result["warnings"] = mine
    revisions = {
        rev.commit_hash: {"refs": sorted(rev.refs), "last_modified": rev.last_modified, "size": rev.size_on_disk}
        for rev in repo.revisions
    }
    record = _load_served(args.record) if args.record else {}
    served = dict(record.get(args.repo) or {})
    if not args.dry_run:
        served[args.revision] = time.time()  # it serves now: the next prune ranks it as the last served
    decision = superseded_revisions(revisions, args.revision, args.keep, args.in_use or [], served)
    result.update(kept=decision["keep"], pruned=decision["prune"], why=decision["why"])
    result["refs"] = {commit: revisions[commit]["refs"] for commit in revisions if revisions[commit]["refs"]}
    if decision["prune"]:
        strategy = info.delete_revisions(*decision["prune"])
        result["freed_bytes"] = int(strategy.expected_freed_size)
        if not args.dry_run:
            strategy.execute()
            for commit in decision["prune"]:  # the role's manifest of a deleted revision: a refetch writes it again
                name = f"{args.repo.replace('/', '--')}@{commit}.json"
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(os.path.dirname(args.manifest), name))
    if args.record and not args.dry_run:
        record[args.repo] = {c: t for c, t in served.items() if c in decision["keep"]}
        tmp = args.record + ".tmp"
        with open(tmp, "w") as handle:
            json.dump(record, handle, indent=1, sort_keys=True)
        os.chmod(tmp, 0o600)
        os.replace(tmp, args.record)
    print(PRUNE_MARK + json.dumps(result, sort_keys=True), flush=True)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["fetch", "serve", "receive", "prune"])
    parser.add_argument("--layout", choices=["hf", "files"], default="hf")
    parser.add_argument("--root", help="files layout: the folder the manifest's paths are under")
    parser.add_argument("--commit-last", action="append", help="files layout: a file name renamed after the others")
    parser.add_argument("--repo")
    parser.add_argument("--revision")
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--status", required=True)
    parser.add_argument("--hash-cache", help="the role's hash cache (JSON), shared with weights_complete")
    parser.add_argument("--endpoint", default=os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    parser.add_argument("--env-file")
    parser.add_argument("--attempts", type=int, default=5)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--bind", default="0.0.0.0")
    parser.add_argument("--allow", action="append", help="a peer address serve accepts (repeat, or commas)")
    parser.add_argument("--token-file", help="the fan-out's per-run token, a 0600 file")
    parser.add_argument("--source")
    parser.add_argument("--local-address", help="the address receive connects from (its fabric address)")
    parser.add_argument("--port", type=int, default=18741)
    parser.add_argument("--peers", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--reserve-gib", type=float, help="fetch, receive: GiB kept free beyond what is written")
    parser.add_argument("--host-cache-dir", help="the node's path of the mounted cache, for messages")
    parser.add_argument("--keep", type=int, default=1, help="prune: revisions kept, the served one included")
    parser.add_argument("--in-use", action="append", help="prune: a commit a running container has mounted (repeat)")
    parser.add_argument("--dry-run", action="store_true", help="prune: say what would go, delete nothing")
    parser.add_argument("--record", help="prune: its JSON record of when each revision was last seen served")
    args = parser.parse_args(argv)
    if args.layout == "files" and (args.command in ("fetch", "prune") or not args.root):
        parser.error("--layout files is for serve and receive, with --root")
    if args.layout == "hf" and not (args.repo and args.revision):
        parser.error("--repo and --revision are required")
    try:
        commands = {"fetch": fetch, "serve": serve, "receive": receive, "prune": prune}
        return commands[args.command](args)
    except Exception as exc:
        status = Status(args.status, args.command)
        status.error = f"{exc}" if isinstance(exc, Refused) else f"{type(exc).__name__}: {exc}"
        status.write(final=True)
        if isinstance(exc, Refused):
            print(f"{args.command}: {exc}", file=sys.stderr)
            return 5
        raise


if __name__ == "__main__":
    sys.exit(main())
