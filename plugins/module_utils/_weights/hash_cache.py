# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The incremental hash cache: a digest stands while the blob's size, mtime_ns and ctime_ns stand (shared by the
module weights_complete and the transfer script)."""

from __future__ import annotations

import json
import os

HASH_CACHE_VERSION = 1


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
