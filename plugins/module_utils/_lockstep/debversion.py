# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Debian version ordering (deb-version(7)): dpkg --compare-versions without forking dpkg."""

from __future__ import annotations

import functools


def _char_order(char):
    if char == "~":
        return -1
    if char.isalpha():
        return ord(char)
    return ord(char) + 256


def _compare_fragment(left, right):
    """Compare one upstream or revision part the way dpkg does (alternating non-digit and digit runs)."""
    i = j = 0
    while i < len(left) or j < len(right):
        first_diff = 0
        while (i < len(left) and not left[i].isdigit()) or (j < len(right) and not right[j].isdigit()):
            lc = _char_order(left[i]) if i < len(left) and not left[i].isdigit() else 0
            rc = _char_order(right[j]) if j < len(right) and not right[j].isdigit() else 0
            if lc != rc:
                return -1 if lc < rc else 1
            i += 1
            j += 1
        while i < len(left) and left[i] == "0":
            i += 1
        while j < len(right) and right[j] == "0":
            j += 1
        while i < len(left) and left[i].isdigit() and j < len(right) and right[j].isdigit():
            if not first_diff:
                first_diff = ord(left[i]) - ord(right[j])
            i += 1
            j += 1
        if i < len(left) and left[i].isdigit():
            return 1
        if j < len(right) and right[j].isdigit():
            return -1
        if first_diff:
            return -1 if first_diff < 0 else 1
    return 0


def _split_version(version):
    version = version.strip()
    epoch = 0
    if ":" in version:
        head, version = version.split(":", 1)
        epoch = int(head) if head.isdigit() else 0
    if "-" in version:
        upstream, revision = version.rsplit("-", 1)
    else:
        upstream, revision = version, ""
    return epoch, upstream, revision


def compare_versions(left, right):
    """-1, 0 or 1 as Debian version ``left`` sorts before, equal to, or after ``right``."""
    l_epoch, l_up, l_rev = _split_version(left)
    r_epoch, r_up, r_rev = _split_version(right)
    if l_epoch != r_epoch:
        return -1 if l_epoch < r_epoch else 1
    return _compare_fragment(l_up, r_up) or _compare_fragment(l_rev, r_rev)


version_key = functools.cmp_to_key(compare_versions)


def release_sort(releases):
    """Releases in Debian version order."""
    return sorted(releases, key=version_key)
