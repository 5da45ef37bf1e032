#!/usr/bin/env python
"""Summarize a running or finished JIT build: ninja steps finished and their times, compiler peak RSS.

Usage: summarize.py BUILD_DIR SAMPLER_DIR
"""

import csv
import os
import statistics
import sys


def main():
    build_dir, sampler_dir = sys.argv[1], sys.argv[2]
    total = 0
    ninja = os.path.join(build_dir, "build.ninja")
    if os.path.exists(ninja):
        with open(ninja) as f:
            total = sum(1 for line in f if line.startswith("build ") and not line.startswith("build $"))
    rows = []
    log = os.path.join(build_dir, ".ninja_log")
    if os.path.exists(log):
        with open(log) as f:
            for line in f:
                if line.startswith("#"):
                    continue
                start_ms, end_ms, _mtime, target, _hash = line.rstrip("\n").split("\t")
                rows.append((int(start_ms), int(end_ms), target))
    print(f"ninja steps finished: {len(rows)} of {total} build statements in build.ninja")
    if rows:
        secs = sorted((e - s) / 1000 for s, e, _target in rows)
        gen = sorted((e - s) / 1000 for s, e, t in rows if ".generated." in t)
        fixed = sorted((e - s) / 1000 for s, e, t in rows if ".generated." not in t and t.endswith(".o"))
        print(f"wall span of finished steps: {max(e for _start, e, _target in rows) / 1000:.0f} s after ninja start")
        print(f"per step s: min {secs[0]:.0f} median {statistics.median(secs):.0f} max {secs[-1]:.0f}")
        if gen:
            print(
                f"generated units: n={len(gen)} min {gen[0]:.0f} median {statistics.median(gen):.0f} max {gen[-1]:.0f}"
            )
        if fixed:
            med = statistics.median(fixed)
            print(f"other objects: n={len(fixed)} min {fixed[0]:.0f} median {med:.0f} max {fixed[-1]:.0f}")
        slow = sorted(rows, key=lambda r: r[0] - r[1])[:5]
        for s, e, t in slow:
            print(f"  slowest {(e - s) / 1000:.0f} s {t}")
    peaks = os.path.join(sampler_dir, "peaks.csv")
    if os.path.exists(peaks):
        by_comm = {}
        with open(peaks) as f:
            for row in csv.DictReader(f):
                by_comm.setdefault(row["comm"], []).append(int(row["peak_rss_mib"]))
        for comm, values in sorted(by_comm.items(), key=lambda kv: -max(kv[1])):
            values.sort()
            print(
                f"peak RSS {comm}: processes {len(values)} max {values[-1]} MiB "
                f"p90 {values[int(0.9 * (len(values) - 1))]} MiB median {statistics.median(values):.0f} MiB"
            )
    totals = os.path.join(sampler_dir, "totals.csv")
    if os.path.exists(totals):
        with open(totals) as f:
            data = list(csv.DictReader(f))
        if data:
            worst = max(data, key=lambda r: int(r["compiler_rss_mib"]))
            print(
                f"all compilers together: max {worst['compiler_rss_mib']} MiB at t={worst['t_s']} s "
                f"({worst['jobs']} jobs, MemAvailable {worst['mem_available_mib']} MiB); samples {len(data)}; "
                f"min MemAvailable {min(int(r['mem_available_mib']) for r in data)} MiB"
            )


if __name__ == "__main__":
    main()
