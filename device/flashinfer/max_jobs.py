#!/usr/bin/env python
"""Print MAX_JOBS for this machine from plugins/module_utils/_flashinfer_jit/job_sizing.py (the role's formula).

Usage: max_jobs.py [--limit-mib N] [--reserve-mib N] [--per-job-mib N]
--limit-mib: the machine's memory limit where /proc/meminfo under-reports it (a ballooning VM); MemAvailable is then
taken as limit - (MemTotal - MemAvailable). The last line printed is the number alone.
"""

import argparse
import os
import pathlib
import sys

repo = pathlib.Path(__file__).resolve().parents[2]
root = pathlib.Path("/tmp/gb10-ac/ansible_collections/gb10")
root.mkdir(parents=True, exist_ok=True)
if not (root / "serving").exists():
    (root / "serving").symlink_to(repo)
sys.path.insert(0, "/tmp/gb10-ac")
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.job_sizing import (
    DEFAULT_PER_JOB_PEAK_MIB,
    DEFAULT_RESERVE_MIB,
    max_jobs,
)

parser = argparse.ArgumentParser()
parser.add_argument("--limit-mib", type=int, default=0)
parser.add_argument("--reserve-mib", type=int, default=DEFAULT_RESERVE_MIB)
parser.add_argument("--per-job-mib", type=int, default=DEFAULT_PER_JOB_PEAK_MIB)
args = parser.parse_args()
info = {}
with open("/proc/meminfo") as f:
    for line in f:
        key, value = line.split(":", 1)
        info[key] = int(value.split()[0]) // 1024
avail = info["MemAvailable"]
print(f"/proc/meminfo: MemTotal {info['MemTotal']} MiB, MemAvailable {avail} MiB; os.cpu_count {os.cpu_count()}")
if args.limit_mib:
    avail = args.limit_mib - (info["MemTotal"] - info["MemAvailable"])
    print(f"memory limit {args.limit_mib} MiB given: MemAvailable taken as {avail} MiB")
result = max_jobs(os.cpu_count(), avail, args.reserve_mib, args.per_job_mib)
print(result["arithmetic"])
print(result["jobs"])
