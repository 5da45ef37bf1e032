# Copyright: gb10.serving maintainers
# Apache-2.0
"""A drain that lasts across a proxy restart (issue 19, item 6; roles/proxy, gb10.serving.haproxy_server record_dir).

spark-2 is drained in every proxy the way a failed rolling upgrade or tool-calling gate leaves it (recorded on each
proxy's node), HAProxy on spark-1 is restarted with `systemctl restart` (a start: the state file of the last reload is
removed, only the records are loaded), and spark-2 must still be drained there while its replica answers /health,
take none of the requests sent through that proxy, stay drained through a reload after it (what a converge does),
and still be drained in the other proxy. Then playbooks/ready.yml, the explicit ready, puts it back: UP and READY in
every proxy, no record left. One restart, no upgrade; the site is left as found (every replica serving and READY).
"""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.converged_site

NODES = ("spark-1", "spark-2")
HELD = "spark-2"
RESTARTED = "spark-1"
RECORD = f"/var/lib/gb10/proxy-admin/vllm/{HELD}"
FDRAIN = 0x08


def wait_for_server(sim, proxy, name, timeout=30):
    """The proxy's runtime API answers again and lists ``name`` (op state, admin state)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            states = sim.backend_states(proxy)
        except RuntimeError:
            states = {}
        if name in states:
            return states
        time.sleep(0.5)
    raise AssertionError(f"{proxy}: HAProxy's runtime API does not list {name} {timeout}s after its restart")


def test_pitfall_restart_forgets_a_drained_replica(served_sim):
    sim = served_sim
    proxies = sim.proxies()
    assert RESTARTED in proxies, f"no proxy on {RESTARTED}: {proxies}"
    try:
        sim.playbook("tests/integration/serving/hold_drain.yml", {"hold_server": HELD})
        for proxy in proxies:
            assert sim.backend_states(proxy)[HELD][1] & FDRAIN, (proxy, sim.backend_states(proxy))
            assert sim.exec(proxy, "test", "-f", RECORD, check=False).returncode == 0, f"{proxy}: no {RECORD}"

        sim.exec(RESTARTED, "systemctl", "restart", "haproxy.service", timeout=120)
        states = wait_for_server(sim, RESTARTED, HELD)
        print(f"\n{RESTARTED} after `systemctl restart haproxy`: {states}")
        assert states[HELD][1] & FDRAIN, f"the restart put the drained {HELD} back in service: {states}"
        assert sim.served(HELD), f"{HELD}'s replica does not answer /health: the test proves nothing"
        stats = sim.proxy_stats(RESTARTED)
        assert stats[HELD]["status"].startswith(("DRAIN", "MAINT")), stats[HELD]
        before = int(stats[HELD]["stot"] or 0)
        for _request in range(6):
            sim.chat("still drained?", url=sim.proxy_at(sim.node_ip(RESTARTED)))
        after = int(sim.proxy_stats(RESTARTED)[HELD]["stot"] or 0)
        assert after == before, f"{RESTARTED}'s proxy sent {after - before} request(s) to the drained {HELD}"
        # A reload (what the proxy role's converge does) keeps it out too: the record is put on the saved state.
        sim.exec(RESTARTED, "systemctl", "reload", "haproxy.service", timeout=120)
        time.sleep(2)
        states = wait_for_server(sim, RESTARTED, HELD)
        assert states[HELD][1] & FDRAIN, f"the reload after the restart put {HELD} back in service: {states}"
        for proxy in proxies:
            assert sim.backend_states(proxy)[HELD][1] & FDRAIN, (proxy, sim.backend_states(proxy))

        sim.playbook("playbooks/ready.yml", {"ready_servers": HELD})
        sim.wait_all_ready(timeout=60)
        for proxy in proxies:
            assert sim.backend_states(proxy)[HELD] == (2, 0), (proxy, sim.backend_states(proxy))
            assert sim.exec(proxy, "test", "-e", RECORD, check=False).returncode != 0, f"{proxy}: {RECORD} is left"
    finally:
        sim.playbook("playbooks/ready.yml", {"ready_servers": HELD}, check=False)
        sim.wait_all_ready()
