# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""What apt-get printed: the part of a failed install an operator needs, the moves of a simulated one."""

from __future__ import annotations

import re

# apt-get prints dpkg's own failure (a maintainer script, a dependency problem) on its stdout, after the whole
# transcript of what it fetched and unpacked; its stderr holds only "E: Sub-process /usr/bin/dpkg returned an error
# code (1)", plus a "W:" line per package when two sources carry one version with other hashes.
_DPKG_FAILURE = re.compile(r"^(dpkg: (error|dependency problems)|Errors were encountered while processing:)")

_APT_NOISE = re.compile(r"^(W: |debconf: )")


def apt_failure_text(stdout, stderr, msg="", limit=800):
    """The part of a failed apt-get an operator needs: dpkg's errors from the first on, then apt's own E: lines.

    Without a dpkg error (apt refused before dpkg ran) it is apt's stderr without its warnings, else ``msg``. The
    last ``limit`` characters: the cause is at the end.
    """
    out = (stdout or "").splitlines()
    first = next((i for i, line in enumerate(out) if _DPKG_FAILURE.match(line)), len(out))
    errors = [line for line in (stderr or "").splitlines() if line.strip() and not _APT_NOISE.match(line)]
    text = "\n".join(out[first:] + errors).strip() or (msg or "").strip()
    return text[-limit:]


# apt-get --simulate's transcript: "Inst name [installed] (target release [arch])", "Remv name [installed]".
_SIMULATED = re.compile(
    r"^(?P<action>Inst|Remv) (?P<package>\S+)(?: \[(?P<installed>[^\]]+)\])?(?: \((?P<target>\S+))?"
)


def simulated_moves(stdout):
    """What ``apt-get install --simulate`` of the set would do: one {package, action, installed, target} per
    ``Inst``/``Remv`` line (``installed`` None for a new package, ``target`` None for a removal); [] when the set is
    in place.

    apt-get honours a name=version given on its command line over every pin, as the install (run after the role
    wrote the target's pins) does. The apt module's check mode adds its own 1001 pin for the version instead, which
    ties with the 1001 pin of the set installed now: going back to an older set it answers "no available
    installation candidate" for a version the repository publishes.
    """
    moves = []
    for line in (stdout or "").splitlines():
        match = _SIMULATED.match(line)
        if match:
            moves.append(
                {
                    "package": match["package"],
                    "action": "remove" if match["action"] == "Remv" else "install",
                    "installed": match["installed"],
                    "target": match["target"],
                }
            )
    return moves
