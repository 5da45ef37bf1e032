#!/usr/bin/env python
"""Sample the RSS of every compiler process of a JIT build from /proc, once a second, into CSV files.

samples.csv: t_s,pid,comm,rss_mib (one row per compiler process per sample)
totals.csv:  t_s,jobs,compiler_rss_mib,mem_available_mib
peaks.csv:   pid,comm,peak_rss_mib,first_t_s,last_t_s (rewritten every 10 s)
Usage: sampler.py OUTDIR [interval_s]
"""

import os
import sys
import time

NAMES = {"cicc", "ptxas", "cudafe++", "nvcc", "fatbinary", "nvlink", "cc1plus", "ld", "collect2", "gcc", "c++", "g++"}


def mem_available_mib():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    return -1


def main():
    out = sys.argv[1]
    interval = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    os.makedirs(out, exist_ok=True)
    start = time.time()
    peaks = {}
    with open(os.path.join(out, "samples.csv"), "w") as samples, open(os.path.join(out, "totals.csv"), "w") as totals:
        loop(out, interval, start, peaks, samples, totals)


def loop(out, interval, start, peaks, samples, totals):
    samples.write("t_s,pid,comm,rss_mib\n")
    totals.write("t_s,jobs,compiler_rss_mib,mem_available_mib\n")
    last_peaks = 0.0
    while True:
        t = round(time.time() - start, 1)
        total = 0
        jobs = 0
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/status") as f:
                    status = f.read()
            except OSError:
                continue
            comm = status.split("\n", 1)[0].split("\t", 1)[-1]
            if comm not in NAMES:
                continue
            rss = 0
            for line in status.splitlines():
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) // 1024
                    break
            samples.write(f"{t},{pid},{comm},{rss}\n")
            total += rss
            if comm == "nvcc" or comm == "c++":
                jobs += 1
            key = (int(pid), comm)
            old = peaks.get(key)
            peaks[key] = (max(rss, old[0]) if old else rss, old[1] if old else t, t)
        totals.write(f"{t},{jobs},{total},{mem_available_mib()}\n")
        samples.flush()
        totals.flush()
        if time.time() - last_peaks > 10:
            last_peaks = time.time()
            with open(os.path.join(out, "peaks.csv.tmp"), "w") as f:
                f.write("pid,comm,peak_rss_mib,first_t_s,last_t_s\n")
                for (pid, comm), (peak, first, last) in sorted(peaks.items()):
                    f.write(f"{pid},{comm},{peak},{first},{last}\n")
            os.replace(os.path.join(out, "peaks.csv.tmp"), os.path.join(out, "peaks.csv"))
        time.sleep(interval)


if __name__ == "__main__":
    main()
