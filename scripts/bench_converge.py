#!/usr/bin/env python
# Copyright: gb10.serving maintainers
# Apache-2.0
"""make bench-converge: what a converge costs, and what a converge with nothing to change costs, per node.

Needs a running, converged simulation (make sim, same SIM_PREFIX / SIM_SUBNET_BASE / GB10_SIM_IMAGES / SIM_PROFILE).
Runs `site.yml -e serving_profile=$SIM_PROFILE` BENCH_CONVERGE_RUNS times (default 2: the first converges whatever
is left, the second is the no-op), each under ansible.posix's json callback, and prints from that callback's own
timings, per run: per node the tasks that ran (ok, changed included), skipped, changed and the seconds the node's
tasks took (their sum); the playbook's seconds (first play's start to last play's end, the callback's clock) and
the process's wall seconds (interpreter start, inventory and collection loading included); then the top 10 tasks by
time (first host's start to last host's end). Extra arguments go to ansible-playbook unchanged (e.g. `--check`, or
`-e` a changed variable); ANSIBLE_* variables in the environment apply as usual (a strategy plugin to try).
BENCH_CONVERGE_JSON=<dir> keeps each run's callback output there; BENCH_CONVERGE_PLAYBOOK=<path> runs another playbook
in site.yml's place (e.g. tests/integration/serving/serving_apply.yml). Timings are printed, never asserted.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROFILE = os.environ.get("SIM_PROFILE", "sim-replicas")
RUNS = int(os.environ.get("BENCH_CONVERGE_RUNS", "2"))
PLAYBOOK = os.environ.get("BENCH_CONVERGE_PLAYBOOK", "site.yml")
TOP = 10


def _stamp(value):
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _run(extra, keep, index):
    """One site.yml run under the json callback: (its parsed output, the process's wall seconds)."""
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    argv = [
        str(REPO / ".venv/bin/ansible-playbook"),
        "-i",
        "inventories/sim",
        PLAYBOOK,
        "-e",
        f"serving_profile={PROFILE}",
        *extra,
    ]
    with tempfile.TemporaryFile("w+") as out:
        started = time.monotonic()
        done = subprocess.run(argv, cwd=REPO, env=env, stdout=out, check=False)
        wall = time.monotonic() - started
        out.seek(0)
        text = out.read()
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        (Path(keep) / f"run-{index}.json").write_text(text)
    try:
        report = json.loads(text[text.index("{") :])
    except ValueError:
        sys.exit(f"bench-converge: run {index} gave no json report (rc {done.returncode}):\n{text[-4000:]}")
    if done.returncode:
        print(f"bench-converge: run {index} exited {done.returncode} (figures below are of a failed run)")
    return report, wall


def summarize(report):
    """Per-host counts and seconds, the playbook's seconds and the tasks by time, from one json callback report."""
    hosts = collections.defaultdict(lambda: {"tasks": 0, "skipped": 0, "changed": 0, "seconds": 0.0})
    spans = {}
    for play in report["plays"]:
        for entry in play["tasks"]:
            task = entry["task"]
            duration = task["duration"]
            if "end" not in duration:
                continue
            seconds = _stamp(duration["end"]) - _stamp(duration["start"])
            key = task["id"]
            first, last, _name = spans.get(key, (duration["start"], duration["end"], task["name"]))
            spans[key] = (min(first, duration["start"]), max(last, duration["end"]), task["name"])
            for host, result in entry["hosts"].items():
                row = hosts[host]
                row["seconds"] += seconds
                if result.get("skipped"):
                    row["skipped"] += 1
                    continue
                row["tasks"] += 1
                row["changed"] += bool(result.get("changed"))
    plays = [play["play"]["duration"] for play in report["plays"] if "end" in play["play"]["duration"]]
    playbook = _stamp(plays[-1]["end"]) - _stamp(plays[0]["start"]) if plays else 0.0
    by_time = sorted(((_stamp(last) - _stamp(first), name) for first, last, name in spans.values()), reverse=True)
    return dict(hosts), playbook, by_time


def main():
    extra = sys.argv[1:]
    keep = os.environ.get("BENCH_CONVERGE_JSON")
    for index in range(1, RUNS + 1):
        report, wall = _run(extra, keep, index)
        hosts, playbook, by_time = summarize(report)
        recap = report["stats"]
        what = " ".join(["no-op" if index > 1 else "", PLAYBOOK, *extra]).strip()
        lines = [f"bench-converge run {index} ({what}):"]
        for host in sorted(hosts):
            row = hosts[host]
            stats = recap.get(host, {})
            lines.append(
                f"  {host}: {row['tasks']} tasks, {row['skipped']} skipped, {row['changed']} changed "
                f"(recap: changed={stats.get('changed', '?')} failures={stats.get('failures', '?')}), "
                f"{row['seconds']:.1f} s of tasks"
            )
        total = sum(row["tasks"] for row in hosts.values())
        changed = sum(row["changed"] for row in hosts.values())
        lines.append(f"  total: {total} tasks, {changed} changed; playbook {playbook:.1f} s, wall {wall:.1f} s")
        lines.append(f"  top {TOP} tasks by time (first host's start to last host's end):")
        lines.extend(f"    {seconds:6.2f} s  {name}" for seconds, name in by_time[:TOP])
        print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
