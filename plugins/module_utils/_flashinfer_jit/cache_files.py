# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Reading a cache file: its text, its sha256 (None when it is not there)."""

from __future__ import annotations

import hashlib
import os


def read_text(path, errors="strict"):
    """A cache file's text; None when it cannot be read (not built yet, removed while we look)."""
    try:
        with open(path, errors=errors) as handle:
            return handle.read()
    except OSError:
        return None


def file_sha256(path):
    """sha256 of a file's bytes, read in 1 MiB chunks (a 64 MB .so); None when there is no such file."""
    if not os.path.isfile(path):
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
