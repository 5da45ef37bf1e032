# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Package holds: which names of a set dpkg must mark ``hold`` or ``install``."""

from __future__ import annotations


def hold_changes(packages, names, held=True):
    """Which of ``names`` dpkg must mark ``hold`` (``held``) or ``install`` (not ``held``): (unknown, changes).

    ``packages`` is :func:`parse_dpkg_query` output for ``names``. ``unknown`` lists the names dpkg has no record of
    or that are not on disk (``dpkg --set-selections`` only warns about, and skips, a name it does not know, which
    would leave that package unheld without an error). ``changes`` is ``[(name, before, after)]`` in ``names`` order,
    each name once, with ``before``/``after`` the selections ``hold`` or ``install``.
    """
    want = "hold" if held else "install"
    unknown, changes, seen = [], [], set()
    for name in names:
        if name in seen:
            continue
        seen.add(name)
        package = packages.get(name)
        if not package or not package["on_disk"]:
            unknown.append(name)
            continue
        before = "hold" if package["held"] else "install"
        if before != want:
            changes.append((name, before, want))
    return unknown, changes
