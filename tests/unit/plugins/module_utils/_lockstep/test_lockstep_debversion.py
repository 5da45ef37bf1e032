# Copyright: gb10.serving maintainers
# Apache-2.0
"""Debian version ordering (_lockstep/debversion.py), as dpkg orders."""

from __future__ import annotations

import pytest

from ansible_collections.gb10.serving.plugins.module_utils._lockstep.debversion import compare_versions


@pytest.mark.parametrize(
    ("lower", "higher"),
    [
        ("6.17.0-1014.14", "6.17.0-1014.14+1"),
        ("6.17.0-1014.14+1", "6.17.0-1018.18"),
        ("6.11.0-1016.16+1000", "6.17.0-1014.14"),
        ("6.17.0-1032.32", "7.0.0-1019.19~24.04.2"),
        ("7.0.0-1019.19~24.04.2", "7.0.0-1019.19"),
        ("580.95.05-0ubuntu0.24.04.2", "580.142-0ubuntu0.24.04.1"),
        ("580.142-0ubuntu0.24.04.1", "580.159.03-0ubuntu0.24.04.1"),
        ("6.17.0-1014-nvidia", "6.17.0-1014-nvidia-64k"),
        ("6.17.0-1018-nvidia", "7.0.0-1019-nvidia"),
        ("1.0~rc1", "1.0"),
        ("9.9", "1:0.1"),
    ],
)
def test_lockstep_compare_versions_orders_like_dpkg(lower, higher):
    assert compare_versions(lower, higher) == -1
    assert compare_versions(higher, lower) == 1
    assert compare_versions(lower, lower) == 0
