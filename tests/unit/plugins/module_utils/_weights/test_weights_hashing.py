# Copyright: gb10.serving maintainers
# Apache-2.0
"""Content digests (plugins/module_utils/_weights/hashing.py)."""

from __future__ import annotations

from _weights_fixtures import sha256

from ansible_collections.gb10.serving.plugins.module_utils._weights.hashing import fingerprint, hash_file


def test_fingerprint_is_over_content():
    a = fingerprint({"x": {"sha256": "1"}, "y": {"sha256": "2"}})
    assert a == fingerprint({"y": {"sha256": "2"}, "x": {"sha256": "1"}})
    assert a != fingerprint({"x": {"sha256": "1"}, "y": {"sha256": "3"}})


def test_hash_file_matches_git_and_sha256(tmp_path):
    path = tmp_path / "f"
    path.write_bytes(b"hello\n")
    assert hash_file(str(path), 6, git=True) == {
        "sha256": sha256(b"hello\n"),
        "git_sha1": "ce013625030ba8dba906f756967f9e9ca394464a",  # git hash-object of "hello\n"
    }
