# Copyright: gb10.serving maintainers
# Apache-2.0
"""playbooks/drain.yml, the maintenance drain (issue 40, item 1), on the served site.

Draining both replicas is refused before anything changes (the last one serving, no drain_force), with the
servers' states and the fix. Then spark-2 is drained: held in every proxy, recorded with the maintenance reason,
idle by its own /metrics (the playbook waited for it), still drained after `systemctl restart haproxy` on
spark-1 (a start loads only the records), and no request sent through that proxy reaches it. playbooks/ready.yml
puts it back; the site is left as found. drain_stop is not run here (starting the units again is a converge):
its order is the plan's unit_names, unit-tested in the plan. No engine changes: it runs on the site as converged
(`converged_site`: make test's is the real vLLM engine, whose own /metrics says when the drained replica is idle).
"""

from __future__ import annotations

import time

import pytest
from test_25_drain_lasts import FDRAIN, RECORD, wait_for_server

pytestmark = pytest.mark.converged_site

HELD = "spark-2"
RESTARTED = "spark-1"


def output(runner):
    return " ".join(runner.stdout.read().split())


def test_maintenance_drain_is_refused_for_the_last_replica_then_lasts_until_ready(served_sim):
    sim = served_sim
    proxies = sim.proxies()
    started = time.monotonic()
    try:
        refused = sim.playbook("playbooks/drain.yml", {"drain_servers": "spark-1,spark-2"}, check=False)
        text = output(refused)
        assert refused.rc != 0, "draining both replicas went through"
        assert "draining spark-1, spark-2 would leave no replica serving" in text, text[-2000:]
        assert "-e drain_force=true" in text and "Nothing was changed" in text
        for proxy in proxies:
            assert sim.backend_states(proxy)[HELD] == (2, 0), (proxy, sim.backend_states(proxy))

        sim.playbook("playbooks/drain.yml", {"drain_servers": HELD})
        for proxy in proxies:
            assert sim.backend_states(proxy)[HELD][1] & FDRAIN, (proxy, sim.backend_states(proxy))
            record = sim.exec(proxy, "cat", RECORD, check=False)
            assert record.returncode == 0 and "maintenance (playbooks/drain.yml" in record.stdout, record

        sim.exec(RESTARTED, "systemctl", "restart", "haproxy.service", timeout=120)
        states = wait_for_server(sim, RESTARTED, HELD)
        assert states[HELD][1] & FDRAIN, f"the restart put the drained {HELD} back in service: {states}"
        before = int(sim.proxy_stats(RESTARTED)[HELD]["stot"] or 0)
        for _request in range(4):
            sim.chat("drained for maintenance?", url=sim.proxy_at(sim.node_ip(RESTARTED)))
        assert int(sim.proxy_stats(RESTARTED)[HELD]["stot"] or 0) == before, f"{HELD} took a request while drained"

        sim.playbook("playbooks/ready.yml", {"ready_servers": HELD})
        sim.wait_all_ready(timeout=60)
        for proxy in proxies:
            assert sim.exec(proxy, "test", "-e", RECORD, check=False).returncode != 0, f"{proxy}: {RECORD} is left"
    except BaseException:
        sim.playbook("playbooks/ready.yml", {"ready_servers": HELD}, check=False)
        sim.wait_all_ready()
        raise
    print(f"\nmaintenance drain test: {time.monotonic() - started:.1f} s")
