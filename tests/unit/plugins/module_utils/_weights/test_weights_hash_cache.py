# Copyright: gb10.serving maintainers
# Apache-2.0
"""The incremental hash cache (plugins/module_utils/_weights/hash_cache.py)."""

from __future__ import annotations

import os

from ansible_collections.gb10.serving.plugins.module_utils._weights.hash_cache import (
    cache_key,
    cached_digests,
    dump_hash_cache,
    load_hash_cache,
    remember,
)


def test_hash_cache_answers_until_the_file_changes(tmp_path):
    path = tmp_path / "blob"
    path.write_bytes(b"a" * 10)
    cache = remember({}, "hub/blob", os.stat(path), {"sha256": "s"})
    assert cached_digests(cache, "hub/blob", os.stat(path)) == {"sha256": "s"}
    assert cached_digests(cache, "hub/blob", os.stat(path), want_git=True) is None
    stat = os.stat(path)
    path.write_bytes(b"b" * 10)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size, mtime put back: ctime still moved
    assert cached_digests(cache, "hub/blob", os.stat(path)) is None
    text = dump_hash_cache(cache)
    assert load_hash_cache(text) == cache
    assert load_hash_cache("{broken") == {}


def test_cache_key_is_the_path_under_the_cache_root():
    assert cache_key("/c", "/c/hub/blobs/ab/x") == "hub/blobs/ab/x"
    assert cache_key("/c", "/elsewhere/x") == "/elsewhere/x"
