# Copyright: gb10.serving maintainers
# Apache-2.0
"""A proxy that survives its node (issue 7; roles/proxy_vip): kill the node holding the floating address under load.

Both nodes run HAProxy and keepalived; clients use only the floating address. The load generator sends streaming
chat requests through that address while a probe asks it for /v1/models ten times a second; then the container of
the node holding the address is killed (SIGKILL: no goodbye advert, as a node losing power). The other node must
take the address, requests may fail only until the endpoint answers again (the VRRP failover window, measured and
printed), and the killed node is started again and left serving and READY, holding no second copy of the address.
Runs last in the suite: it takes a node away.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
import urllib.request

import pytest
from _api import API_KEY, api_headers

from ansible_collections.gb10.serving.plugins.module_utils import _loadgen

NODES = ("spark-1", "spark-2")
MODEL = "tiny-moe"
LOAD_BEFORE_KILL_S = 8
LOAD_AFTER_KILL_S = 30
CONCURRENCY = 4
REQUEST_TIMEOUT_S = 30
PROBE_EVERY_S = 0.1
PROBE_TIMEOUT_S = 1.0
RETURN_TIMEOUT_S = 900


def floating_address(sim):
    """(address, prefix, interface) as keepalived on spark-1 holds them in its configuration."""
    config = sim.exec(NODES[0], "cat", "/etc/keepalived/keepalived.conf", check=False)
    if config.returncode != 0:
        pytest.skip("no keepalived.conf on spark-1: this site has no floating proxy address (proxy_vip_address unset)")
    found = re.search(r"^\s+(\d+\.\d+\.\d+\.\d+)/(\d+) dev (\S+)$", config.stdout, re.M)
    assert found, f"no virtual_ipaddress in spark-1's keepalived.conf:\n{config.stdout}"
    return found.group(1), int(found.group(2)), found.group(3)


def holders(sim, address, nodes=NODES):
    held = []
    for node in nodes:
        shown = sim.exec(node, "ip", "-4", "-o", "addr", "show", "to", f"{address}/32", check=False, timeout=15)
        if shown.returncode == 0 and f" {address}/" in shown.stdout:
            held.append(node)
    return held


def probe(url, context, stop, records):
    """Ask the floating address for /v1/models every PROBE_EVERY_S until stopped; (start, end, ok)."""
    while not stop.is_set():
        start = time.monotonic()
        try:
            request = urllib.request.Request(f"{url}/v1/models", headers=api_headers())
            with urllib.request.urlopen(request, timeout=PROBE_TIMEOUT_S, context=context) as answer:
                ok = answer.status == 200
        except OSError:
            ok = False
        records.append((start, time.monotonic(), ok))
        stop.wait(max(0.0, PROBE_EVERY_S - (time.monotonic() - start)))


def node_back(sim, node):
    """The node's systemd is up, its replica answers /health, and its HAProxy and keepalived are active."""
    try:
        state = sim.exec(node, "systemctl", "is-system-running", check=False, timeout=15).stdout.strip()
        units = sim.exec(node, "systemctl", "is-active", "haproxy", "keepalived", check=False, timeout=15)
    except subprocess.TimeoutExpired:
        return False
    return state in ("running", "degraded") and units.stdout.split() == ["active", "active"] and sim.served(node)


def bring_back(sim, node):
    subprocess.run(["docker", "start", sim.container(node)], check=True, capture_output=True, timeout=120)
    started = time.monotonic()
    deadline = started + RETURN_TIMEOUT_S
    while time.monotonic() < deadline and not node_back(sim, node):
        time.sleep(5)
    assert node_back(sim, node), f"{node} did not serve again within {RETURN_TIMEOUT_S} s of docker start"
    sim.wait_all_ready(timeout=300)
    return time.monotonic() - started


def test_floating_address_moves_when_its_node_is_killed_under_load(served_sim):
    sim = served_sim
    address, prefix, interface = floating_address(sim)
    # TLS: the certificate names the floating address, so whichever node holds it serves a certificate that verifies.
    url = sim.proxy_at(address)
    before = holders(sim, address)
    assert len(before) == 1, f"{address} must be held by exactly one node, is held by {before or 'none'}"
    victim = before[0]
    survivor = next(node for node in NODES if node != victim)
    # The fence must come back with the node: a boot-order cycle once left a restarted node with no table at all
    # (roles/fabric_firewall's unit, DefaultDependencies=no). test_98 runs on the site as converged, before this.
    fence = sim.exec(victim, "nft", "list", "table", "inet", "gb10_fabric").stdout
    reply = sim.chat("hello through the floating address", url=url)
    assert reply["choices"], reply

    records, probes = [], []
    stop = threading.Event()
    prompt = _loadgen.filler_prompt(32)
    load = threading.Thread(
        target=lambda: records.extend(
            _loadgen.run(
                url,
                MODEL,
                CONCURRENCY,
                100000,
                prompt,
                16,
                REQUEST_TIMEOUT_S,
                LOAD_BEFORE_KILL_S + LOAD_AFTER_KILL_S,
                api_key=API_KEY,
                ca_path=str(sim.proxy_ca),
            )
        ),
        daemon=True,
    )
    prober = threading.Thread(target=probe, args=(url, sim.tls, stop, probes), daemon=True)
    killed = False
    try:
        load.start()
        prober.start()
        time.sleep(LOAD_BEFORE_KILL_S)
        t_kill = time.monotonic()
        subprocess.run(["docker", "kill", sim.container(victim)], check=True, capture_output=True, timeout=60)
        killed = True
        t_moved = None
        while time.monotonic() - t_kill < LOAD_AFTER_KILL_S:
            if holders(sim, address, (survivor,)):
                t_moved = time.monotonic()
                break
            time.sleep(0.2)
        load.join(timeout=LOAD_AFTER_KILL_S + REQUEST_TIMEOUT_S + 30)
        stop.set()
        prober.join(timeout=10)
        assert not load.is_alive(), "the load generator did not finish"

        assert t_moved is not None, f"{survivor} did not take {address} within {LOAD_AFTER_KILL_S} s of the kill"
        failed = [r for r in records if not r["ok"]]
        # t_moved is when the poll saw the address on the survivor, at or after the real takeover: a request that
        # fails after it failed on the new holder, outside the VRRP window.
        late = [r for r in failed if r["start"] > t_moved]
        ok_after = [r for r in records if r["ok"] and r["start"] > t_moved]
        in_flight = [r for r in records if r["start"] < t_kill < r["end"]]
        waited = [r["end"] - r["start"] for r in records if r["ok"] and r["start"] < t_moved < r["end"]]
        # The window, as a client sees it: from the kill to the first answer after the last failure before the
        # takeover (a killed container's processes can answer for a few ms after `docker kill` returns).
        failures = [p[0] for p in probes if not p[2] and t_kill < p[0] <= t_moved]
        failures += [r["start"] for r in failed if t_kill < r["start"] <= t_moved]
        t_last_failure = max(failures, default=t_kill)
        back = [end for start, end, ok in probes if ok and start >= t_last_failure]
        assert back, f"the floating address never answered again after the kill (probes: {len(probes)})"
        t_back = min(back)

        print(f"\nfloating address {address}/{prefix} on {interface}: held by {victim}, killed {victim}'s container")
        print(f"  {survivor} was seen holding the address {t_moved - t_kill:.2f} s after the kill (polled)")
        print(
            f"  failover window: {t_back - t_kill:.2f} s from the kill to the first answer after the last failure "
            f"(probe every {PROBE_EVERY_S} s, {PROBE_TIMEOUT_S} s timeout)"
        )
        print(
            f"  requests: {len(records)} sent at concurrency {CONCURRENCY}, {len(records) - len(failed)} ok, "
            f"{len(failed)} failed ({len(in_flight)} were in flight at the kill), {len(late)} failed after the "
            f"takeover, {len(ok_after)} ok after it; requests that waited through it took up to "
            f"{max(waited, default=0):.2f} s"
        )
        for error in sorted({r["error"] for r in failed}):
            alike = [r for r in failed if r["error"] == error]
            print(
                f"  {len(alike)} failed, started {min(r['start'] for r in alike) - t_kill:+.2f} s to "
                f"{max(r['start'] for r in alike) - t_kill:+.2f} s from the kill: {error}"
            )

        assert not late, f"{len(late)} request(s) sent after the takeover failed: {sorted({r['error'] for r in late})}"
        assert ok_after, "no request succeeded through the floating address after the failover"
        assert holders(sim, address, (survivor,)) == [survivor]
    finally:
        stop.set()
        if killed:
            took = bring_back(sim, victim)
            now = holders(sim, address)
            print(f"  {victim} served and READY again {took:.0f} s after docker start; {address} held by {now}")
            assert len(now) == 1, f"after {victim} returned, {address} is held by {now or 'none'}"
            again = sim.exec(victim, "nft", "list", "table", "inet", "gb10_fabric", check=False)
            assert again.stdout == fence, f"{victim} came back with another fence: {again.stdout}{again.stderr}"
            assert sim.chat("hello after the failover", url=url)["choices"]
