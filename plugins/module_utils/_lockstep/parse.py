# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Parsers for what the node prints: dpkg-query's package states, ``ls /lib/modules``, a ``Depends`` field."""

from __future__ import annotations

import re

from .naming import RELEASE_RE

# dpkg "Status" states whose files are on disk (a kernel in one of them is bootable, a module loadable).
_ON_DISK_STATES = frozenset({"installed", "triggers-pending", "triggers-awaited"})

_DEP_RE = re.compile(
    r"^\s*(?P<name>[a-z0-9][a-z0-9+.-]*)(?::[a-z0-9-]+)?\s*(?:\((?P<op><<|<=|=|>=|>>)\s*(?P<ver>[^)\s]+)\s*\))?"
)

# The dpkg-query -W format parse_dpkg_query reads.
DPKG_QUERY_FORMAT = "${Package} ${Version} ${Status}\n"


def parse_dpkg_query(text):
    """Parse ``dpkg-query -W -f='${Package} ${Version} ${Status}\\n'`` output.

    Returns ``{name: {"name", "version", "want", "error", "state", "on_disk", "held"}}``. Architecture
    qualifiers (``pkg:arm64``) are dropped. Lines of packages known to dpkg but without a version (``not-installed``)
    are kept with ``on_disk`` false so callers can tell "absent" from "unknown".
    """
    packages = {}
    for raw in text.splitlines():
        fields = raw.split()
        if len(fields) == 4:
            # ${Version} is empty for a package dpkg only remembers (e.g. "unknown ok not-installed").
            name, want, error, state = fields
            version = ""
        elif len(fields) == 5:
            name, version, want, error, state = fields
        else:
            continue
        name = name.split(":", 1)[0]
        packages[name] = {
            "name": name,
            "version": version,
            "want": want,
            "error": error,
            "state": state,
            "on_disk": state in _ON_DISK_STATES,
            "held": want == "hold",
        }
    return packages


def parse_lib_modules(text):
    """Kernel releases from ``ls /lib/modules`` (one per line or whitespace separated), sorted, unique."""
    return sorted({entry.strip().rstrip("/") for entry in text.split() if RELEASE_RE.match(entry.strip().rstrip("/"))})


def parse_depends(text):
    """Parse a Debian ``Depends`` field into ``[{"name", "op", "version"}]`` (alternatives flattened in order)."""
    result = []
    for clause in text.split(","):
        for alternative in clause.split("|"):
            match = _DEP_RE.match(alternative)
            if match:
                result.append({"name": match.group("name"), "op": match.group("op"), "version": match.group("ver")})
    return result
