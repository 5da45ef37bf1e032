#!/usr/bin/env python
"""Runs inside a throwaway container of the serving image (managed by the gb10.serving model_weights role).

  fetch    download one pinned revision from the hub into the mounted Hugging Face cache with the image's own
           huggingface_hub, resuming across failed calls, and record the hub's file sizes (the manifest)
  serve    on the node that has the snapshot: stream the blobs another node lacks over the fabric
  receive  on another node: take the snapshot from the serving node, blob by blob, keeping partial blobs

The hub token is read from the root-only env file mounted at --env-file and passed to huggingface_hub as an
argument: it is never in this process's argv or in the container's configuration. Progress goes to --status
(JSON: phase, bytes_done, bytes_total, error) at least every few seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tarfile
import threading
import time

CACHE = os.environ.get("GB10_HF_HUB_CACHE", "/root/.cache/huggingface/hub")


def repo_folder(repo_id):
    return os.path.join(CACHE, "models--" + repo_id.replace("/", "--"))


class Status:
    """The status file the role polls. The reporter thread and the final write share one temporary file, so they
    take turns; once the final status is written no progress write may replace it (the role would wait on)."""

    def __init__(self, path, phase, total=0):
        self.path, self.phase, self.total, self.error = path, phase, total, None
        self.done_fn = lambda: 0
        self._lock = threading.Lock()
        self._finished = False

    def write(self, final=False):
        with self._lock:
            if self._finished:
                return
            data = {
                "phase": self.phase,
                "bytes_done": self.done_fn(),
                "bytes_total": self.total,
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
        entries = [
            {"path": f.path, "size": f.size, "oid": f.blob_id, "lfs": {"oid": f.lfs.sha256} if f.lfs else None}
            for f in api.list_repo_tree(args.repo, revision=args.revision, recursive=True)
            if getattr(f, "size", None) is not None
        ]
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
    manifest = {e["path"]: {"size": e["size"], "blob": (e["lfs"] or {}).get("oid") or e["oid"]} for e in entries}
    folder = repo_folder(args.repo)
    os.makedirs(os.path.join(folder, "blobs"), exist_ok=True)
    status.total = sum(e["size"] for e in manifest.values())
    status.done_fn = lambda: blob_bytes(folder, manifest)
    status.run_reporter()
    headers = build_hf_headers(token=token)
    # huggingface_hub resumes a dropped connection within one call, but deletes its partial file when the call
    # fails. So each blob is first brought in with the client's own ranged http_get into a partial file this script
    # keeps across failed calls and attempts; snapshot_download then finds every blob and only links the snapshot.
    for path, entry in sorted(manifest.items()):
        blob = os.path.join(folder, "blobs", entry["blob"])
        if os.path.exists(blob) and os.path.getsize(blob) == entry["size"]:
            continue
        partial = blob + ".incomplete"
        url = hf_hub_url(args.repo, path, revision=args.revision, endpoint=args.endpoint)
        for attempt in range(1, args.attempts + 1):
            with open(partial, "ab") as handle:
                have = handle.tell()
                try:
                    http_get(url, handle, resume_size=have, headers=headers, expected_size=entry["size"])
                    break
                except Exception as exc:
                    print(f"{path}: attempt {attempt} stopped at {handle.tell()} bytes ({exc}); retrying", flush=True)
            time.sleep(min(2 * attempt, 30))
        else:
            status.error = f"{path}: {args.attempts} attempts failed; the partial file is kept and the next run resumes"
            status.write(final=True)
            return 4
        os.replace(partial, blob)
    snapshot = snapshot_download(
        args.repo,
        revision=args.revision,
        cache_dir=CACHE,
        token=token,
        endpoint=args.endpoint,
        max_workers=args.workers,
    )
    with open(args.manifest + ".tmp", "w") as handle:
        json.dump(dict(sorted(manifest.items())), handle, indent=1)
    os.replace(args.manifest + ".tmp", args.manifest)
    status.write(final=True)
    print(json.dumps({"snapshot": snapshot, "bytes_total": status.total}))
    return 0


def snapshot_members(repo, revision):
    """Relative paths under the repo folder of one snapshot: its links, the blobs they name, its ref files."""
    folder = repo_folder(repo)
    snapshot = os.path.join(folder, "snapshots", revision)
    links, blobs = [], {}
    for root, _dirs, names in os.walk(snapshot):
        for name in sorted(names):
            path = os.path.join(root, name)
            links.append(os.path.relpath(path, folder))
            target = os.path.realpath(path)
            blobs[os.path.relpath(target, folder)] = os.path.getsize(target)
    return links, blobs


def serve(args):
    status = Status(args.status, "serve")
    links, blobs = snapshot_members(args.repo, args.revision)
    folder = repo_folder(args.repo)
    listener = socket.create_server((args.bind, args.port), reuse_port=True)
    listener.settimeout(args.timeout)
    status.write()
    served = 0
    while served < args.peers:
        conn, peer = listener.accept()
        with conn:
            have = json.loads(conn.makefile("rb").readline() or b"{}")
            with conn.makefile("wb") as out, tarfile.open(fileobj=out, mode="w|") as tar:
                tar.add(args.manifest, arcname="gb10-manifest.json")
                for rel, size in sorted(blobs.items()):
                    if have.get(rel) != size:
                        tar.add(os.path.join(folder, rel), arcname=rel)
                for rel in links:
                    tar.add(os.path.join(folder, rel), arcname=rel, recursive=False)
        served += 1
        print(f"served {peer[0]}", flush=True)
    status.write(final=True)
    return 0


def receive(args):
    status = Status(args.status, "receive")
    folder = repo_folder(args.repo)
    os.makedirs(os.path.join(folder, "blobs"), exist_ok=True)
    have = {}
    for name in os.listdir(os.path.join(folder, "blobs")):
        if not name.endswith(".incomplete"):
            have["blobs/" + name] = os.path.getsize(os.path.join(folder, "blobs", name))
    received = [0]
    status.done_fn = lambda: sum(have.values()) + received[0]
    status.run_reporter()
    deadline = time.time() + min(args.timeout, 120)
    while True:
        try:
            conn = socket.create_connection((args.source, args.port), timeout=30)
            break
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(1)
    with conn:
        conn.sendall(json.dumps(have).encode() + b"\n")
        with conn.makefile("rb") as stream, tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                target = args.manifest if member.name == "gb10-manifest.json" else os.path.join(folder, member.name)
                if not os.path.abspath(target).startswith((folder + os.sep, args.manifest)):
                    raise ValueError(f"refusing {member.name}: outside the model's cache folder")
                os.makedirs(os.path.dirname(target), exist_ok=True)
                if member.issym():
                    if os.path.lexists(target):
                        os.unlink(target)
                    os.symlink(member.linkname, target)
                    continue
                partial = target + ".incomplete"
                with tar.extractfile(member) as src, open(partial, "wb") as dst:
                    while chunk := src.read(1 << 20):
                        dst.write(chunk)
                        received[0] += len(chunk)
                os.replace(partial, target)
                if target == args.manifest:
                    with open(target) as handle:
                        status.total = sum(entry["size"] for entry in json.load(handle).values())
    status.write(final=True)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["fetch", "serve", "receive"])
    parser.add_argument("--repo", required=True)
    parser.add_argument("--revision", required=True)
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--status", required=True)
    parser.add_argument("--endpoint", default=os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    parser.add_argument("--env-file")
    parser.add_argument("--attempts", type=int, default=5)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--bind", default="0.0.0.0")
    parser.add_argument("--source")
    parser.add_argument("--port", type=int, default=18741)
    parser.add_argument("--peers", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=600)
    args = parser.parse_args(argv)
    try:
        return {"fetch": fetch, "serve": serve, "receive": receive}[args.command](args)
    except Exception as exc:
        status = Status(args.status, args.command)
        status.error = f"{type(exc).__name__}: {exc}"
        status.write(final=True)
        raise


if __name__ == "__main__":
    sys.exit(main())
