# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""earlyoom arithmetic: the arguments that keep the killer armed, and what its own startup log says.

Pure functions over plain data. earlyoom signals only when memory AND swap are both at or below their
thresholds (seed 004 pitfall 1), so with vm.swappiness=0 the swap side stays near 100 % free and any
swap threshold below 100 % silently disarms that signal. With no swap at all earlyoom counts swap as
0 % free, which satisfies every swap threshold.
"""

from __future__ import annotations

import re

_GIB_MIB = 1024.0

# earlyoom 1.7:  "sending SIGTERM when mem <= 4.00% and swap <= 100.00%,"
# earlyoom 1.8+: "sending SIGTERM when mem avail <= 4.00% and swap free <= 100.00%,"
_THRESHOLD_RE = re.compile(
    r"(?P<signal>SIGTERM|SIGKILL) when mem(?: avail)? <=\s*(?P<mem>[0-9.]+)% and swap(?: free)? <=\s*(?P<swap>[0-9.]+)%"
)
_PREFER_RE = re.compile(r"Preferring to kill process names that match regex '(?P<regex>.*)'")
_AVOID_RE = re.compile(r"Will avoid killing process names that match regex '(?P<regex>.*)'")
_VERSION_RE = re.compile(r"earlyoom (?P<version>v?[0-9][0-9A-Za-z.+-]*)\s*$")
_KILL_RE = re.compile(r'sending (?P<signal>SIGTERM|SIGKILL) to process (?P<pid>\d+) uid \d+ "(?P<name>[^"]*)"')


class ThresholdError(ValueError):
    """A threshold the operator gave cannot be turned into earlyoom arguments."""


def threshold_percent(value, mem_total_mib):
    """Turn '4%', '4', '4.9GiB' or '5000MiB' into a percent of MemTotal, rounded to 2 decimals."""
    text = str(value).strip()
    match = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)\s*(%|GiB|MiB)?", text)
    if not match:
        raise ThresholdError(f"threshold {value!r} is neither a percent ('4%') nor a size ('4.9GiB', '5000MiB')")
    number, unit = float(match.group(1)), match.group(2) or "%"
    if unit == "%":
        percent = number
    else:
        mib = number * _GIB_MIB if unit == "GiB" else number
        percent = mib * 100.0 / float(mem_total_mib)
    if not 0 < percent < 100:
        raise ThresholdError(
            f"threshold {value!r} is {percent:.2f}% of MemTotal {mem_total_mib} MiB: must be >0 and <100"
        )
    return round(percent, 2)


def effective_thresholds(mem_arg, swap_arg):
    """earlyoom's own reading of '-m A[,B]' and '-s C[,D]': an omitted kill value is half the term value."""

    def pair(arg, default):
        if arg is None:
            return default
        parts = [float(p) for p in str(arg).split(",")]
        return (parts[0], parts[1] if len(parts) > 1 else parts[0] / 2)

    mem = pair(mem_arg, (10.0, 5.0))
    swap = pair(swap_arg, (10.0, 5.0))
    return {
        "SIGTERM": {"mem": mem[0], "swap": swap[0]},
        "SIGKILL": {"mem": mem[1], "swap": swap[1]},
    }


def disarm_problems(thresholds, swappiness, swap_total_mib):
    """Every signal whose swap condition can never come true on this node, with the arithmetic."""
    problems = []
    # No swap reads as 0 % free (always true); swappiness above 0 lets swap fill, so the AND can close.
    if int(swap_total_mib) == 0 or int(swappiness) != 0:
        return problems
    for signal in ("SIGTERM", "SIGKILL"):
        swap = thresholds[signal]["swap"]
        if swap < 100.0:
            problems.append(
                f"{signal} waits for swap free <= {swap:.2f}% AND mem <= {thresholds[signal]['mem']:.2f}%, but "
                f"vm.swappiness=0 keeps the {swap_total_mib} MiB of swap ~100% free, so {signal} never fires; "
                f"give the swap side explicitly as 100 for both signals (-s 100,100)"
            )
    return problems


def build_args(
    mem_total_mib,
    sigterm,
    sigkill,
    swappiness,
    swap_total_mib,
    swap_sigterm_percent=10,
    swap_sigkill_percent=5,
    report_interval=3600,
    prefer=None,
    avoid=None,
):
    """The argument list for earlyoom, plus the arithmetic an operator can check, plus any refusal."""
    term = threshold_percent(sigterm, mem_total_mib)
    kill = threshold_percent(sigkill, mem_total_mib)
    problems = []
    if kill > term:
        problems.append(f"SIGKILL threshold {kill:.2f}% is above SIGTERM's {term:.2f}%: SIGKILL would fire first")
    # The swap side is made always true where swap cannot be relied on to fill: swappiness 0 or no swap.
    if int(swappiness) == 0 or int(swap_total_mib) == 0:
        swap_term, swap_kill = 100.0, 100.0
    else:
        swap_term, swap_kill = float(swap_sigterm_percent), float(swap_sigkill_percent)
    mem_arg = f"{term:g},{kill:g}"
    swap_arg = f"{swap_term:g},{swap_kill:g}"
    thresholds = effective_thresholds(mem_arg, swap_arg)
    problems.extend(disarm_problems(thresholds, swappiness, swap_total_mib))
    args = ["-r", str(int(report_interval)), "-m", mem_arg, "-s", swap_arg]
    for name, regex in (("prefer", prefer), ("avoid", avoid)):
        # systemd splits $EARLYOOM_ARGS at whitespace, passes quotes through literally, and its
        # EnvironmentFile parser eats backslashes inside double quotes (cudafe\+\+ arrives as cudafe++).
        if regex and re.search(r"[\s'\"\\]", regex):
            problems.append(
                f"the {name} regex {regex!r} holds whitespace, quotes or backslashes, which systemd would split, "
                "pass literally or drop on the way to earlyoom: write it without them ([+] instead of \\+)"
            )
    if prefer:
        args += ["--prefer", prefer]
    if avoid:
        args += ["--avoid", avoid]
    arithmetic = (
        f"SIGTERM at mem <= {term:.2f}% (~{mem_total_mib * term / 100 / _GIB_MIB:.1f} GiB of {mem_total_mib} MiB), "
        f"SIGKILL at mem <= {kill:.2f}% (~{mem_total_mib * kill / 100 / _GIB_MIB:.1f} GiB); swap side "
        f"{swap_term:g}%/{swap_kill:g}% (swappiness {int(swappiness)}, swap {int(swap_total_mib)} MiB)"
    )
    return {
        "args": args,
        "thresholds": thresholds,
        "arithmetic": arithmetic,
        "problems": problems,
    }


def parse_startup(lines):
    """Read the thresholds, prefer/avoid regexes and version from earlyoom's own startup lines."""
    found = {"version": None, "thresholds": {}, "prefer": None, "avoid": None}
    for line in lines:
        for match in _THRESHOLD_RE.finditer(line):
            found["thresholds"][match.group("signal")] = {
                "mem": float(match.group("mem")),
                "swap": float(match.group("swap")),
            }
        if (match := _PREFER_RE.search(line)) is not None:
            found["prefer"] = match.group("regex")
        if (match := _AVOID_RE.search(line)) is not None:
            found["avoid"] = match.group("regex")
        if (match := _VERSION_RE.search(line)) is not None and " to process " not in line:
            found["version"] = match.group("version")
    return found


def armed_problems(reported, intended, swappiness, swap_total_mib, prefer=None, avoid=None):
    """Compare what earlyoom says it will do with what was intended; an empty list means armed."""
    problems = []
    for name, want in (("prefer", prefer), ("avoid", avoid)):
        if want and reported[name] != want:
            problems.append(f"earlyoom reports {name} regex {reported[name]!r}, intended {want!r}")
    for signal in ("SIGTERM", "SIGKILL"):
        got = reported["thresholds"].get(signal)
        want = intended[signal]
        if got is None:
            problems.append(f"earlyoom's log since its last start has no {signal} threshold line")
            continue
        for side in ("mem", "swap"):
            if abs(got[side] - want[side]) > 0.005:
                problems.append(
                    f"{signal} {side} threshold is {got[side]:.2f}% in earlyoom's own log, intended {want[side]:.2f}%"
                )
    if len(reported["thresholds"]) == 2:
        problems.extend(disarm_problems(reported["thresholds"], swappiness, swap_total_mib))
    return problems


def kills(lines):
    """The processes earlyoom signalled, as (signal, pid, name) tuples, in log order."""
    return [(m.group("signal"), int(m.group("pid")), m.group("name")) for m in map(_KILL_RE.search, lines) if m]


# Node truths read back after the role applied them (issue 19, item 7): what the kernel runs, not what was written.
CAP_SYS_RESOURCE = 24
OOM_PROTECTED_SCORE = -1000


def swappiness_verdict(node, kernel_text, intended, applied, sysctl_file):
    """vm.swappiness as /proc/sys/vm/swappiness shows it against the value the sysctl.d file holds.

    ``applied``: the role applied the sysctl (memory_guard_sysctl_apply). Not ok only where it did and the kernel
    still runs another value; where it did not, the message says plainly that the kernel's value stands."""
    kernel, intended = int(str(kernel_text).strip()), int(intended)
    if kernel == intended:
        how = "" if applied else " (not applied by this role: memory_guard_sysctl_apply is false)"
        return {
            "kernel": kernel,
            "intended": intended,
            "ok": True,
            "msg": f"vm.swappiness on {node}: the kernel runs {kernel}, as {sysctl_file} says{how}",
        }
    if applied:
        msg = (
            f"{node}: vm.swappiness is {kernel} in the kernel (/proc/sys/vm/swappiness) right after {sysctl_file} "
            f"({intended}) was applied: something else sets it (a sysctl.d file sorted after it, /etc/sysctl.conf, "
            f"tuned, a container runtime). Find it with `grep -rn swappiness /etc/sysctl.conf /etc/sysctl.d "
            f"/run/sysctl.d /usr/lib/sysctl.d` and remove it, or set memory_guard_swappiness to {kernel} if the node "
            f"must run that"
        )
        return {"kernel": kernel, "intended": intended, "ok": False, "msg": msg}
    msg = (
        f"vm.swappiness not applied on {node}: the kernel runs {kernel}, the file says {intended} "
        f"(memory_guard_sysctl_apply is false: this node's /proc/sys is read-only); earlyoom is checked against the "
        f"kernel's {kernel}"
    )
    return {"kernel": kernel, "intended": intended, "ok": True, "msg": msg}


def capability_in_bounding_set(status_text, capability=CAP_SYS_RESOURCE):
    """Whether a /proc/<pid>/status's CapBnd holds ``capability`` (None when there is no CapBnd line)."""
    found = re.search(r"^CapBnd:\s*([0-9a-fA-F]+)\s*$", status_text or "", re.M)
    return None if found is None else bool(int(found.group(1), 16) >> capability & 1)


def oom_protection_verdict(node, unit, main_pid, score_text, pid1_status, required, wanted=OOM_PROTECTED_SCORE):
    """Whether a protected unit's main process runs with OOMScoreAdjust=-1000, read from the kernel.

    ``score_text``: /proc/<MainPID>/oom_score_adj; ``pid1_status``: /proc/1/status, whose CapBnd says whether the
    node may lower scores at all (without CAP_SYS_RESOURCE the kernel refuses a negative score, and systemd starts
    the unit all the same: it logs the refusal at debug level, so the unit's start result cannot say).
    ``required``: memory_guard_oom_protect_required; a score not applied is not ok only where it is true."""
    pid = int(main_pid or 0)
    score = int(str(score_text).strip()) if pid and str(score_text or "").strip() else None
    if score == int(wanted):
        return {
            "applied": True,
            "ok": True,
            "score": score,
            "msg": f"{unit} on {node}: OOMScoreAdjust={wanted} applied (main process {pid}: oom_score_adj {score})",
        }
    capable = capability_in_bounding_set(pid1_status)
    if score is None:
        seen = f"{unit} has no main process to read (MainPID {pid}, the unit does not run)"
    elif capable is False:
        seen = (
            f"its main process {pid} runs at oom_score_adj {score}: this node lacks CAP_SYS_RESOURCE (not in PID 1's "
            f"capability bounding set, as in an unprivileged container), so the kernel refuses a negative score, "
            f"and systemd starts the unit all the same"
        )
    else:
        seen = (
            f"its main process {pid} runs at oom_score_adj {score} although the node may lower scores: the drop-in "
            f"did not reach this run (the unit was not restarted since, or another drop-in sets OOMScoreAdjust after "
            f"gb10-oom-protect.conf: systemd-delta)"
        )
    msg = f"{unit} on {node}: OOMScoreAdjust={wanted} not applied: {seen}"
    if required:
        msg += (
            f". Fix: give the node CAP_SYS_RESOURCE or restart {unit} (systemctl show -p OOMScoreAdjust {unit}); on "
            f"a node that cannot lower scores, set memory_guard_oom_protect_required: false for it to accept {unit} "
            f"unprotected"
        )
    else:
        msg += f"; accepted: memory_guard_oom_protect_required is false on {node}, {unit} runs unprotected"
    return {"applied": False, "ok": not required, "score": score, "msg": msg}
