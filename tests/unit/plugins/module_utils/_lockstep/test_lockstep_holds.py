# Copyright: gb10.serving maintainers
# Apache-2.0
"""Package holds (_lockstep/holds.py)."""

from __future__ import annotations

from ansible_collections.gb10.serving.plugins.module_utils._lockstep.holds import hold_changes
from ansible_collections.gb10.serving.plugins.module_utils._lockstep.parse import parse_dpkg_query


def test_hold_changes_names_each_package_to_mark_once_and_the_unknown_ones():
    packages = parse_dpkg_query(
        "a 1.0 install ok installed\nb 1.0 hold ok installed\nc 1.0 deinstall ok config-files\n"
    )
    assert hold_changes(packages, ["a", "b", "a", "c", "d"]) == (["c", "d"], [("a", "install", "hold")])
    assert hold_changes(packages, ["a", "b"], held=False) == ([], [("b", "hold", "install")])
