# Copyright: gb10.serving maintainers
# Apache-2.0
"""A replica's container killed under load costs no request that had not received a byte (issue 36 item 3).

Under a steady load through the proxy (streaming and plain chat requests in turn), spark-2's engine container is
killed (`docker kill`, SIGKILL: what a crash or the OOM killer does) while the proxy holds requests in flight on
it. HAProxy's L7 retries (roles/proxy: retry-on conn-failure empty-response junk-response 502 503, redispatch on
every retry) send every request that got no byte from the dead replica to spark-1: the connections the kill closed
under queued or prefilling requests (empty-response) and the ones the proxy opened to it before its health check
took it out (conn-failure). A stream whose first byte had gone out cannot be retried: the client saw it cut; such
requests are counted and printed, not failed. systemd restarts the unit (Restart=on-failure) and the test waits
until both replicas are serving and READY again, so the site is left as found.

The kill changes no engine (systemd starts the same unit again), so it runs on the site as converged
(`converged_site`: make test's is the real vLLM engine, whose dying worker closes the proxy's connections as the
field's does); its wait follows the restart of the engine the site serves (ServedSim.engine_restart_s).
"""

from __future__ import annotations

import time

import pytest
from _api import API_KEY

from ansible_collections.gb10.serving.plugins.module_utils import _loadgen

pytestmark = pytest.mark.converged_site

KILLED, SERVING = "spark-2", "spark-1"
CONCURRENCY = 4


def _in_flight(sim, node):
    """Requests every proxy holds open on ``node``'s replica now (`show stat` scur)."""
    return sum(int((sim.proxy_stats(proxy).get(node) or {}).get("scur") or 0) for proxy in sim.proxies())


def _retries(sim):
    """Every proxy's retries and redispatches of the serving backend (the BACKEND row)."""
    return sum(
        int(row.get("wretr") or 0) + int(row.get("wredis") or 0)
        for proxy in sim.proxies()
        for name, row in sim.proxy_stats(proxy).items()
        if name == "BACKEND"
    )


def got_no_byte(record):
    """A failed request whose replica sent it nothing: no HTTP status reached the client, or the proxy's own 5xx
    (no replica answered), and no token. A stream that had its 200 and was cut had its first byte."""
    status = int(record.get("status") or 0)
    return not record.get("first_token") and (status == 0 or status >= 500)


def test_pitfall_replica_killed_under_load_loses_no_request_that_got_no_byte(served_sim):
    sim = served_sim
    sim.wait_all_ready()
    load = _loadgen.Steady(
        sim.proxy_url,
        "tiny-moe",
        concurrency=CONCURRENCY,
        max_tokens=48,
        timeout=120,
        pause_s=0.05,
        api_key=API_KEY,
        ca_path=str(sim.proxy_ca),
    )
    retries_before = _retries(sim)
    load.start()
    try:
        time.sleep(5)  # both replicas serve before the kill
        deadline, held = time.monotonic() + 30, 0
        while time.monotonic() < deadline and held == 0:
            held = _in_flight(sim, KILLED)
        assert held > 0, f"the proxy never held a request on {KILLED} in 30 s: nothing to lose at the kill"
        sim.exec(KILLED, "docker", "kill", "gb10-vllm")
        killed_at = time.monotonic()
        time.sleep(20)  # the proxy's checks take it out; spark-1 serves everything meanwhile
    finally:
        records = load.stop()
    sim.wait_all_ready(timeout=sim.engine_restart_s + 60)
    back = time.monotonic() - killed_at
    retried = _retries(sim) - retries_before
    failed = _loadgen.failures(records)
    lost = [r for r in failed if got_no_byte(r)]
    cut = [r for r in failed if not got_no_byte(r)]
    streams = [r for r in cut if r.get("stream")]
    print(
        f"\n{KILLED}'s container killed with {held} request(s) in flight on it: {len(records)} requests, "
        f"{len(failed)} failed ({len(streams)} stream(s) cut after their first byte, {len(cut) - len(streams)} other "
        f"after a byte, {len(lost)} with no byte); the proxies retried {retried} time(s); both replicas READY "
        f"again {back:.0f} s after the kill"
    )
    assert retried > 0, "the proxy retried nothing: the kill cost no request in flight, the test proved nothing"
    assert lost == [], f"{len(lost)} request(s) that had received no byte failed: {lost[:3]}"
    assert len(cut) <= held + CONCURRENCY, f"more requests cut than were in flight at the kill: {cut[:3]}"
