# Copyright: gb10.serving maintainers
# Apache-2.0
"""Reading a cache file (plugins/module_utils/_flashinfer_jit/cache_files.py)."""

from __future__ import annotations

import pytest

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.cache_files import read_text


def test_read_text_is_none_for_a_file_that_is_not_there(tmp_path):
    (tmp_path / "build.ninja").write_text("rule cxx\n")
    assert read_text(str(tmp_path / "build.ninja")) == "rule cxx\n"
    assert read_text(str(tmp_path / "missing")) is None


def test_read_text_replaces_bytes_that_are_not_text_only_when_asked(tmp_path):
    """.ninja_log is read with errors="replace" (a torn write may leave any byte); a stamp is read strictly."""
    (tmp_path / ".ninja_log").write_bytes(b"# ninja log v5\n\xff\n")
    assert read_text(str(tmp_path / ".ninja_log"), errors="replace") == "# ninja log v5\n\ufffd\n"
    with pytest.raises(UnicodeDecodeError):
        read_text(str(tmp_path / ".ninja_log"))
