"""A local model hub: the parts of the Hugging Face HTTP API that the real huggingface_hub client uses.

Serves the generated repository of sim/model/tiny_moe.py. Strictness follows the real hub where the client
depends on it (see ../../shared notes in README.md): revision metadata, tree listing with Link pagination,
HEAD/GET resolve with X-Repo-Commit, ETag / X-Linked-Etag (git blob sha1, or sha256 for LFS files), sizes,
Range requests answered with 206, typed 404s (X-Error-Code). Simulation controls under /_sim/:
  GET  /_sim/stats        bytes of file bodies served, per path and in total, and the repository sizes
  POST /_sim/reset        zero the counters and clear any cut
  POST /_sim/cut?path=P&after=N&drops=K
                          the next GET of P sends N body bytes and drops the connection; the K GETs of P after
                          that drop at once (K >= 6 makes one huggingface_hub 2.4.0 call fail)
With --token-file, every request outside /_sim/ must carry `Authorization: Bearer <token>` (401 otherwise).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "model"))
import tiny_moe

TREE_PAGE_SIZE = 5  # small, so the client's pagination is exercised on a 12-file repository
CHUNK = 1 << 20


class Repo:
    def __init__(self, repo_id: str, revisions: dict[str, dict[str, bytes]], refs: dict[str, str]):
        self.repo_id, self.revisions, self.refs = repo_id, revisions, refs
        self.meta: dict[str, dict[str, dict]] = {}
        for commit, files in revisions.items():
            self.meta[commit] = {}
            for path, data in files.items():
                entry = {"type": "file", "path": path, "size": len(data)}
                if tiny_moe.is_lfs(path):
                    pointer = tiny_moe.lfs_pointer(data)
                    entry["oid"] = tiny_moe.git_blob_sha1(pointer)
                    entry["lfs"] = {
                        "oid": hashlib.sha256(data).hexdigest(),
                        "size": len(data),
                        "pointerSize": len(pointer),
                    }
                else:
                    entry["oid"] = tiny_moe.git_blob_sha1(data)
                self.meta[commit][path] = entry

    def sibling(self, commit: str, path: str) -> dict:
        entry = self.meta[commit][path]
        sibling = {"rfilename": path, "size": entry["size"], "blobId": entry["oid"]}
        if "lfs" in entry:
            lfs = entry["lfs"]
            sibling["lfs"] = {"sha256": lfs["oid"], "size": lfs["size"], "pointerSize": lfs["pointerSize"]}
        return sibling

    def resolve(self, revision: str) -> str | None:
        revision = self.refs.get(revision, revision)
        return revision if revision in self.revisions else None

    def etag(self, commit: str, path: str) -> str:
        entry = self.meta[commit][path]
        return entry["lfs"]["oid"] if "lfs" in entry else entry["oid"]


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        self.bytes_total, self.by_path, self.requests, self.cut = 0, {}, [], None

    def count(self, path: str, sent: int):
        with self.lock:
            self.bytes_total += sent
            self.by_path[path] = self.by_path.get(path, 0) + sent


def make_handler(repo: Repo, state: State, token: str | None):
    resolve_re = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<path>.+)$")
    revision_re = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/revision/(?P<rev>[^/]+)$")
    tree_re = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/tree/(?P<rev>[^/]+)(?:/(?P<path>.*))?$")

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "gb10-sim-hub/1"

        def log_message(self, fmt, *args):  # one line per request, without the Authorization header
            sys.stderr.write(f"{self.address_string()} {fmt % args}\n")

        def _send(self, code: int, body: bytes = b"", headers: dict | None = None, head: bool = False):
            self.send_response(code)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if body and not head:
                self.wfile.write(body)

        def _json(self, code: int, data, headers: dict | None = None, head: bool = False):
            self._send(code, json.dumps(data).encode(), {"Content-Type": "application/json", **(headers or {})}, head)

        def _error(self, code: int, error_code: str, message: str, head: bool = False):
            self._json(code, {"error": message}, {"X-Error-Code": error_code, "X-Error-Message": message}, head)

        def _authorized(self) -> bool:
            if token is None or self.headers.get("Authorization") == f"Bearer {token}":
                return True
            self._error(401, "Unauthorized", "Invalid credentials in Authorization header")
            return False

        def _lookup(self, repo_id: str, rev: str, head: bool = False) -> str | None:
            if repo_id != repo.repo_id:
                self._error(404, "RepoNotFound", f"Repository not found: {repo_id}", head)
                return None
            commit = repo.resolve(rev)
            if commit is None:
                self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
            return commit

        def do_POST(self):
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            if url.path == "/_sim/reset":
                with state.lock:
                    state.reset()
                return self._json(200, {"reset": True})
            if url.path == "/_sim/cut":
                with state.lock:
                    state.cut = {
                        "path": query["path"],
                        "after": int(query["after"]),
                        "drops": int(query.get("drops", 0)),
                    }
                return self._json(200, {"cut": state.cut})
            return self._error(404, "EntryNotFound", url.path)

        def do_HEAD(self):
            self._get(head=True)

        def do_GET(self):
            self._get(head=False)

        def _get(self, head: bool):
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query).items()}
            if url.path == "/_sim/stats":
                sizes = {c: sum(len(d) for d in f.values()) for c, f in repo.revisions.items()}
                with state.lock:
                    stats = {"bytes_total": state.bytes_total, "by_path": dict(state.by_path), "cut": state.cut}
                return self._json(200, {**stats, "repo_bytes": sizes})
            if not self._authorized():
                return None
            match = resolve_re.match(url.path)
            if match:
                return self._resolve(match["repo"], match["rev"], match["path"], head)
            match = revision_re.match(url.path)
            if match:
                commit = self._lookup(match["repo"], match["rev"], head)
                if commit:
                    siblings = [{"rfilename": p} for p in repo.revisions[commit]]
                    if query.get("blobs", "").lower() == "true":  # the hub's files_metadata=True answer
                        siblings = [repo.sibling(commit, s["rfilename"]) for s in siblings]
                    info = {
                        "id": repo.repo_id,
                        "modelId": repo.repo_id,
                        "sha": commit,
                        "private": False,
                        "disabled": False,
                        "gated": False,
                        "tags": [],
                        "siblings": siblings,
                    }
                    self._json(200, info, head=head)
                return None
            match = tree_re.match(url.path)
            if match:
                return self._tree(match["repo"], match["rev"], match["path"] or "", query, head)
            return self._error(404, "EntryNotFound", f"{url.path} is not served by the simulation's hub", head)

        def _tree(self, repo_id: str, rev: str, prefix: str, query: dict, head: bool):
            commit = self._lookup(repo_id, rev, head)
            if commit is None:
                return
            entries = [e for p, e in repo.meta[commit].items() if p.startswith(prefix)]
            start = int(query.get("cursor", "0"))
            page = entries[start : start + TREE_PAGE_SIZE]
            headers = {}
            if start + TREE_PAGE_SIZE < len(entries):
                host = self.headers.get("Host", "hub")
                params = dict(query, cursor=str(start + TREE_PAGE_SIZE))
                qs = "&".join(f"{k}={quote(v)}" for k, v in sorted(params.items()))
                headers["Link"] = f'<http://{host}{urlsplit(self.path).path}?{qs}>; rel="next"'
            self._json(200, page, headers, head)

        def _resolve(self, repo_id: str, rev: str, path: str, head: bool):
            commit = self._lookup(repo_id, rev, head)
            if commit is None:
                return
            data = repo.revisions[commit].get(path)
            if data is None:
                return self._error(404, "EntryNotFound", f"{path} does not exist on {rev}", head)
            etag = repo.etag(commit, path)
            headers = {
                "X-Repo-Commit": commit,
                "ETag": f'"{etag}"',
                "Accept-Ranges": "bytes",
                "Content-Type": "application/octet-stream",
            }
            if tiny_moe.is_lfs(path):
                headers.update({"X-Linked-Etag": f'"{etag}"', "X-Linked-Size": str(len(data))})
            start, code = 0, 200
            ranged = re.match(r"^bytes=(\d+)-(\d*)$", self.headers.get("Range", ""))
            end = len(data)
            if ranged:
                start = int(ranged[1])
                end = min(int(ranged[2]) + 1, len(data)) if ranged[2] else len(data)
                if start >= len(data):
                    return self._send(416, b"", {"Content-Range": f"bytes */{len(data)}"}, head)
                code = 206
                headers["Content-Range"] = f"bytes {start}-{end - 1}/{len(data)}"
            self.send_response(code)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(end - start))
            self.end_headers()
            if head:
                return
            limit = None
            with state.lock:
                cut = state.cut
                if cut and cut["path"] == path:
                    if cut["after"] >= 0:
                        limit, cut["after"] = cut["after"], -1
                    elif cut["drops"] > 0:
                        limit, cut["drops"] = 0, cut["drops"] - 1
                    if cut["after"] < 0 and cut["drops"] <= 0:
                        state.cut = None
            view, sent, stop = memoryview(data)[start:end], 0, end - start if limit is None else min(limit, end - start)
            try:
                while sent < stop:
                    piece = view[sent : min(sent + CHUNK, stop)]
                    self.wfile.write(piece)
                    sent += len(piece)
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                state.count(path, sent)
            if limit is not None and sent < end - start:
                self.close_connection = True
                self.connection.shutdown(2)

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bind", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--token-file", help="require this bearer token (file holds the token alone)")
    args = parser.parse_args(argv)
    token = Path(args.token_file).read_text().strip() if args.token_file else None
    repo = Repo(tiny_moe.REPO_ID, tiny_moe.repository(), tiny_moe.REFS)
    server = ThreadingHTTPServer((args.bind, args.port), make_handler(repo, State(), token))
    server.daemon_threads = True
    print(f"hub serving {repo.repo_id} ({', '.join(repo.revisions)}) on {args.bind}:{args.port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
