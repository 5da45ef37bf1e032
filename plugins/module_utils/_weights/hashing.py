# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Content digests: the sha256 and git blob sha1 of a file or of bytes as they pass, and a fingerprint of a listing."""

from __future__ import annotations

import hashlib
import json

_CHUNK = 8 << 20


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


def fingerprint(observed):
    """A digest of {path: sha256} so nodes can be compared by content without shipping their listings around.

    ``observed`` maps paths to their digests ({"sha256", ...}) or, for callers that only have sizes, to sizes.
    """
    flat = {p: (v.get("sha256") if isinstance(v, dict) else v) for p, v in observed.items()}
    text = json.dumps(dict(sorted(flat.items())), separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
