# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Progress of a running build, from ninja's "[k/N]" lines, and the no-progress limit that calls it stalled."""

from __future__ import annotations

import re

_PROGRESS_RE = re.compile(r"^\s*\[(?P<k>\d+)/(?P<n>\d+)\]")


def _minutes(seconds):
    seconds = int(max(0, seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s"


def build_progress(log_lines, elapsed_s, since_progress_s, stall_s, last_build=None):
    """One line on a build under way: ninja's [k/N], elapsed, an estimate; stalled when [k/N] has not moved for stall_s.

    last_build: {"seconds", "steps", "node"} of the cluster's last finished build of this module (its stamp), or None.
    since_progress_s: seconds since the log last showed a new [k/N].
    """
    k = n = 0
    for line in log_lines:
        m = _PROGRESS_RE.match(line)
        if m:
            k, n = int(m.group("k")), int(m.group("n"))
    if last_build and last_build.get("seconds"):
        total = float(last_build["seconds"])
        source = f"last build {_minutes(total)}" + (f" on {last_build['node']}" if last_build.get("node") else "")
        left = max(0.0, total - elapsed_s)
        estimate = f"about {_minutes(left)} left ({source})"
    elif k and n:
        left = elapsed_s / k * (n - k)
        estimate = f"about {_minutes(left)} left (at this build's pace; no earlier build to go by)"
    else:
        estimate = "no estimate yet (no earlier build, no step finished)"
    step = f"[{k}/{n}]" if n else "[0/?] (ninja has printed no step yet)"
    stalled = since_progress_s >= stall_s
    message = f"{step} {_minutes(elapsed_s)} elapsed, {estimate}"
    if stalled:
        message += (
            f"; STALLED: no step finished for {_minutes(since_progress_s)}, more than the worst case of one unit"
            f" ({_minutes(stall_s)})"
        )
    return {"k": k, "n": n, "stalled": stalled, "message": message}


# No build step finished for this long is a stall when nothing better is known: longer than seed 004's whole
# fused_moe_120 build on a GB10 (20-25 minutes at MAX_JOBS 10), since one unit's own worst case was never measured.
STALL_FLOOR_S = 1800


def stall_seconds(stated, last_worst_unit_s, floor_s=STALL_FLOOR_S, factor=3):
    """The no-progress limit: stated when > 0, else factor x the slowest unit of the last build, at least floor_s.

    With MAX_JOBS jobs running, [k/N] stays put at most as long as the slowest single unit takes.
    """
    if stated and stated > 0:
        return int(stated)
    return int(max(floor_s, factor * float(last_worst_unit_s or 0)))
