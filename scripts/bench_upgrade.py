#!/usr/bin/env python
# Copyright: gb10.serving maintainers
# Apache-2.0
"""make bench-upgrade: the rolling upgrade's overhead beyond the replicas' own restart time, per node.

Needs a converged simulation (make sim, same SIM_PREFIX / SIM_SUBNET_BASE / GB10_SIM_IMAGES). Per node:
1. the replica's own restart: drained in the proxy, stopped, then `systemctl start gb10-vllm.service` to its first
   /health 200 (measured here, from the control machine), put back ready;
2. a rolling upgrade that changes the vLLM options (drops --enable-prefix-caching), then one back to the
   inventory's profile, each writing its per-node step times (-e rolling_upgrade_report);
3. prints, per node and run: the upgrade's total (drain to ready), the replica's own restart, and the overhead
   (total minus own restart: drain wait, stop, apply, warm-up, smoke test, ready), and how the node got its
   FlashInfer module (built, received from another node over the fabric: built once per cluster, or present) with
   that step's seconds. Then a run to the stand-in's next release (a new image digest, sim/publish_image.sh) and
   one back: the first drained node builds the module, the other receives it. BENCH_UPGRADE_IMAGE=<repo@sha256:...>
   names another image; BENCH_UPGRADE_IMAGE=none leaves the image runs out.
Timings are printed, never asserted. The site is left on the inventory's profile, both replicas ready.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
PROFILE = os.environ.get("SIM_PROFILE", "sim-replicas")
PREFIX = os.environ.get("SIM_PREFIX", "gb10-sim")
SUBNET = os.environ.get("SIM_SUBNET_BASE", "10.77.0")
NODES = ("spark-1", "spark-2")
SOCKET = "/run/haproxy/admin.sock"


def node_ip(node):
    return f"{SUBNET}.{10 + int(node.rsplit('-', 1)[1])}"


def dexec(node, *argv, stdin=None):
    return subprocess.run(
        ["docker", "exec", "-i", f"{PREFIX}-{node}", *argv], input=stdin, capture_output=True, text=True, check=True
    ).stdout


def admin(command):
    return dexec(NODES[0], "socat", "stdio", f"unix-connect:{SOCKET}", stdin=command + "\n")


def healthy(node):
    try:
        with urllib.request.urlopen(f"http://{node_ip(node)}:8000/health", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


def wait(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    sys.exit(f"bench-upgrade: {what} did not happen within {timeout}s")


def own_restart(node):
    """Seconds from `systemctl start` of a stopped, drained replica to its first /health 200."""
    admin(f"set server vllm/{node} state drain")
    try:
        dexec(node, "systemctl", "stop", "gb10-vllm.service")
        started = time.monotonic()
        dexec(node, "systemctl", "start", "gb10-vllm.service")
        wait(lambda: healthy(node), 900, f"{node}'s /health after its start")
        return time.monotonic() - started
    finally:
        wait(lambda: healthy(node), 900, f"{node}'s /health")
        admin(f"set server vllm/{node} state ready")
        # Its warm agent holds it DOWN until its watchdog's warm-up (no Ansible run follows this start): the next
        # step must find it serving, or the rolling upgrade refuses to drain the only replica left.
        wait(lambda: in_service(node), 300, f"{node} up in the proxy after its watchdog's warm-up")


def in_service(node):
    rows = [line.split() for line in admin("show servers state vllm").splitlines() if not line.startswith("#")]
    return any(len(row) > 5 and row[3] == node and row[5] == "2" for row in rows)


def next_image():
    """The stand-in's next release as sim/publish_image.sh recorded it ($GB10_SIM_IMAGES), or "" where it did not."""
    images = Path(os.environ.get("GB10_SIM_IMAGES", REPO / "sim/build/images.yml"))
    published = yaml.safe_load(images.read_text()) if images.is_file() else {}
    inventory = yaml.safe_load((REPO / "inventories/sim/group_vars/all/sim_image.yml").read_text())
    digest = (published or {}).get("gb10_sim_standin_next_digest")
    return f"{inventory['gb10_sim_standin_repository']}@{digest}" if digest else ""


def upgrade(extravars, label):
    report = Path(tempfile.mkdtemp(prefix="gb10-bench-upgrade-")) / "report.json"
    variables = {"serving_profile": PROFILE, "rolling_upgrade_report": str(report), **extravars}
    vars_file = report.with_name("extravars.json")
    vars_file.write_text(json.dumps(variables))
    started = time.monotonic()
    run = subprocess.run(
        ["ansible-playbook", "-i", "inventories/sim", "playbooks/rolling_upgrade.yml", "-e", f"@{vars_file}"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode != 0:
        print(run.stdout[-4000:], run.stderr[-2000:])
        sys.exit(f"bench-upgrade: the rolling upgrade ({label}) failed")
    return json.loads(report.read_text()), time.monotonic() - started


def main():
    profiles = yaml.safe_load((REPO / "inventories/sim/group_vars/all/serving_profiles.yml").read_text())
    changed = copy.deepcopy(profiles["serving_profiles"])
    changed[PROFILE]["vllm_options"].pop("enable-prefix-caching", None)

    for node in NODES:
        wait(lambda node=node: healthy(node), 60, f"{node} serving before the bench")
    own = {node: own_restart(node) for node in NODES}
    runs = [("drop --enable-prefix-caching", {"serving_profiles": changed}), ("back to the inventory's profile", {})]
    image = os.environ.get("BENCH_UPGRADE_IMAGE") or next_image()
    if image and image != "none":
        to_image = copy.deepcopy(profiles["serving_profiles"])
        to_image[PROFILE]["image"]["ref"] = image
        runs += [(f"to image {image[-12:]}", {"serving_profiles": to_image}), ("back to the inventory's image", {})]
    results = [(label, *upgrade(extra, label)) for label, extra in runs]

    print(f"\nRolling upgrade overhead, simulation {PREFIX} (profile {PROFILE}); seconds")
    header = ("total", 7), ("own restart", 12), ("overhead", 9), ("drain wait", 11), ("after /health", 14)
    header += (("flashinfer", 24), ("its s", 6))
    print(f"{'run':34} {'node':8} " + " ".join(f"{name:>{width}}" for name, width in header))
    for label, report, wall in results:
        for node in NODES:
            figures = (report.get(node) or {}).get("figures")
            if not figures:
                print(f"{label:34} {node:8} skipped (already on the target)")
                continue
            overhead = figures["total_s"] - own[node]
            step = report[node].get("flashinfer") or {}
            how = step.get("action", "?") + (f" from {step['source']}" if step.get("source") else "")
            print(
                f"{label:34} {node:8} {figures['total_s']:7.1f} {own[node]:12.1f} {overhead:9.1f} "
                f"{figures['drain_wait_s']:11.1f} {figures['after_healthy_s']:14.1f} "
                f"{how:>24} {float(step.get('seconds') or 0):6.1f}"
            )
        print(f"{label:34} {'(play)':8} {wall:7.1f}  whole playbook, preflight of the target on every node included")


if __name__ == "__main__":
    main()
