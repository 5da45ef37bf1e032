# Copyright: gb10.serving maintainers
# Apache-2.0
"""The watchdog restarts a frozen replica (issue 19 item 4, roles/serving/files/gb10-serving-watchdog).

spark-2's watchdog is first applied with short figures (fast(): every 5 s, a start grace of the engine's restart
time, ServedSim.engine_restart_s: 60 s for the stand-in, 300 s for the real vLLM CPU engine; the serving role's
preflight allows it only with serving_health_timeout no longer), by a serving apply of spark-2 alone (the watchdog's
units change, the engine's do not), and put back to the inventory's after. The frozen replica must have run longer
than the grace. Under a steady load through the proxy, spark-2's engine is then frozen with SIGSTOP of the process
Docker's init runs in the gb10-vllm container (PID 1 is the init: the units' --init). For the stand-in that is the
whole engine (the API server, the engine and its token clock are threads of `vllm serve`;
sim/standin/src/vllm/_standin/cli.py); for the real engine it is vLLM's API server (the GPU layer runs vLLM's CLI
in its process, sim/vllm_cpu/gpu_layer.py), and the EngineCore it spawned runs on.
Either way /health stops answering too, so this test shows the restart of a replica that stopped answering, not the
/health-200-while-frozen case itself (tests/unit/roles/serving/test_watchdog.py's
test_pitfall_health_200_while_the_engine_is_frozen covers that against a real HTTP server). The process is stopped
from the node (its PID in the node's namespace: the child of the PID `docker inspect` gives).

Then: the watchdog decides to restart gb10-vllm.service on spark-2 within interval x failures + probe timeout + 60 s
(its journal says `restart`), the unit comes back with a new InvocationID and container (the watchdog kills the
container first: a stopped process keeps SIGTERM pending for docker stop's whole timeout), spark-2 generates again,
is warmed once by its watchdog (issue 19 item 5: the proxy holds it up only after the warm marker is written), and
is UP and READY in the proxy, spark-1 served in every 10 s of the outage, and the only failed requests are those
the proxy sent to spark-2 before its health check marked it DOWN (in flight at the freeze or just after). The
finally sends SIGCONT (a no-op once the container is gone) and waits until every replica is serving and READY.

The watchdog restarts the same unit and the test puts the watchdog's figures back, so it runs on the site as
converged (`converged_site`: make test's is the real vLLM engine, whose restart under load is the case that
matters: its API server frozen while the EngineCore it spawned runs on); the allowances follow the profile the site
serves (ServedSim.engine_restart_s).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from pathlib import Path

import pytest
import yaml
from _api import API_KEY, api_headers

from ansible_collections.gb10.serving.plugins.module_utils import _bench, _loadgen

pytestmark = pytest.mark.converged_site

REPO = Path(__file__).resolve().parents[3]
FROZEN = "spark-2"
SERVING = "spark-1"
UNIT = "gb10-vllm.service"
WATCHDOG = "gb10-watchdog-replica.service"
CONCURRENCY = 4
APPLY = "tests/integration/serving/serving_apply.yml"


def fast(sim):
    """What a real site's 30 s / 1200 s defaults (an engine loads for minutes) would make a test of many minutes. The
    grace is no shorter than the engine's restart, or the watchdog would restart the restarted replica in its load."""
    return {
        "serving_watchdog_interval": 5,
        "serving_watchdog_start_grace": sim.engine_restart_s,
        "serving_health_timeout": sim.engine_restart_s,
    }


def settings(sim):
    """The watchdog's and the stop's figures as this test applies them (fast() over the inventory and the defaults)."""
    merged = yaml.safe_load((REPO / "roles" / "serving" / "defaults" / "main.yml").read_text())
    merged.update(yaml.safe_load((REPO / "inventories" / "sim" / "group_vars" / "all" / "serving.yml").read_text()))
    merged.update(fast(sim))
    return {key: merged[key] for key in merged if key.startswith(("serving_watchdog_", "serving_stop_"))}


def active_for(sim, node):
    """Seconds since the node's gb10-vllm.service became active (the nodes share the host's clock)."""
    shown = sim.exec(node, "systemctl", "show", "--value", "-p", "ActiveEnterTimestamp", "--timestamp=unix", UNIT)
    return time.time() - float(shown.stdout.strip().lstrip("@") or 0)


def invocation(sim, node):
    return sim.exec(node, "systemctl", "show", "--value", "-p", "InvocationID", UNIT, check=False).stdout.strip()


def container_id(sim, node):
    return sim.exec(node, "docker", "inspect", "-f", "{{.Id}}", "gb10-vllm", check=False).stdout.strip()


def watchdog_journal(sim, since):
    """What FROZEN's watchdog printed since ``since`` (journalctl's @epoch; the nodes share the host's clock)."""
    argv = ["journalctl", "--no-pager", "-o", "cat", "-u", WATCHDOG, "--since", since]
    return sim.exec(FROZEN, *argv, check=False).stdout


def engine_pid(sim, node):
    """The engine's PID in the node's namespace, and `docker top` (what runs in the container) for the record: the
    one child of the container's PID 1, Docker's init (the serving units' --init)."""
    init = sim.exec(node, "docker", "inspect", "-f", "{{.State.Pid}}", "gb10-vllm").stdout.strip()
    top = sim.exec(node, "docker", "top", "gb10-vllm", check=False).stdout
    assert init.isdigit() and int(init) > 0, f"{node}: gb10-vllm has no running process: {init!r}"
    comm = sim.exec(node, "cat", f"/proc/{init}/comm").stdout.strip()
    assert comm == "docker-init", f"{node}: gb10-vllm's PID 1 is {comm!r}, not Docker's init:\n{top}"
    children = sim.exec(node, "cat", f"/proc/{init}/task/{init}/children").stdout.split()
    assert len(children) == 1, f"{node}: Docker's init has children {children}, not one engine:\n{top}"
    return children[0], top


def served_count(sim, node):
    """The replica's own vllm:request_success_total (None when it does not answer in 3 s)."""
    try:
        with urllib.request.urlopen(f"{sim.replica_url(node)}/metrics", timeout=3) as answer:
            return _bench.parse_metrics(answer.read().decode()).get("vllm:request_success_total", 0.0)
    except (OSError, ValueError):
        return None


def generates(sim, node, timeout=30):
    """One completion of the replica itself (POST /v1/completions, as the watchdog asks) answers with a choice."""
    body = json.dumps({"model": "tiny-moe", "prompt": "Hello", "max_tokens": 1}).encode()
    request = urllib.request.Request(f"{sim.replica_url(node)}/v1/completions", data=body, headers=api_headers())
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return bool(json.loads(answer.read()).get("choices"))
    except (OSError, ValueError):
        return False


def wait_for(what, check, timeout, every=1.0):
    """Seconds until ``check()`` is true; fails with ``what`` after ``timeout``."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():
            return time.monotonic() - started
        time.sleep(every)
    raise AssertionError(f"{what}: not within {timeout:.0f} s")


class Watch(threading.Thread):
    """Every second: the time the proxy first holds FROZEN down, and SERVING's own served count."""

    def __init__(self, sim):
        super().__init__(daemon=True)
        self.sim, self.stop = sim, threading.Event()
        self.down_at, self.samples = None, []
        self.up_again_wall = None  # time.time() of the first sample that finds FROZEN up again after down_at

    def run(self):
        while not self.stop.is_set():
            now = time.monotonic()
            try:
                op_state = self.sim.backend_states().get(FROZEN, (2, 0))[0]
            except RuntimeError:
                op_state = 2
            if self.down_at is None and op_state != 2:
                self.down_at = now
            elif self.down_at is not None and self.up_again_wall is None and op_state == 2:
                self.up_again_wall = time.time()
            self.samples.append((now, served_count(self.sim, SERVING)))
            self.stop.wait(1.0)


def test_watchdog_restarts_a_frozen_replica_under_load(served_sim):
    sim = served_sim
    sim.playbook(APPLY, fast(sim), limit=f"localhost,{FROZEN}")
    try:
        _frozen_replica_is_restarted(sim)
    finally:
        sim.playbook(APPLY, limit=f"localhost,{FROZEN}")
        sim.wait_all_ready()


def _frozen_replica_is_restarted(sim):
    figures = settings(sim)
    # Failed probes inside the start grace are not counted: the replica must have run longer than it.
    outlive = max(0.0, figures["serving_watchdog_start_grace"] + 5 - active_for(sim, FROZEN))
    print(f"\n{FROZEN}: {outlive:.0f} s until the replica has run longer than the start grace")
    time.sleep(outlive)
    decide_within = (
        figures["serving_watchdog_interval"] * figures["serving_watchdog_failures"]
        + figures["serving_watchdog_probe_timeout"]
        + 60
    )
    back_within = decide_within + figures["serving_stop_timeout"] + figures["serving_stop_grace"] + 60
    before = {"invocation": invocation(sim, FROZEN), "container": container_id(sim, FROZEN)}
    pid, top = engine_pid(sim, FROZEN)
    print(f"\n{FROZEN}: gb10-vllm runs (docker top):\n{top}")
    load = _loadgen.Steady(
        sim.proxy_url,
        "tiny-moe",
        concurrency=CONCURRENCY,
        max_tokens=8,
        timeout=120,
        pause_s=0.1,
        api_key=API_KEY,
        ca_path=str(sim.proxy_ca),
    )
    watch = Watch(sim)
    load.start()
    watch.start()
    try:
        time.sleep(5)  # both replicas serve before the freeze
        sim.exec(FROZEN, "kill", "-STOP", pid)
        frozen_at, since = time.monotonic(), f"@{int(time.time()) - 1}"
        decided = wait_for(
            f"{FROZEN}: the watchdog's restart of {UNIT}",
            lambda: f"{UNIT}: restart (" in watchdog_journal(sim, since),
            decide_within,
        )
        back = wait_for(
            f"{FROZEN}: {UNIT} started again (new InvocationID and container)",
            lambda: (
                invocation(sim, FROZEN) not in ("", before["invocation"])
                and container_id(sim, FROZEN) not in ("", before["container"])
            ),
            back_within - decided,
            every=2.0,
        )
        started = wait_for(
            f"{FROZEN}: a generation of its own", lambda: generates(sim, FROZEN), sim.engine_restart_s, every=2.0
        )
        sim.wait_all_ready(timeout=sim.engine_restart_s)
        back_at = time.monotonic()
        # The proxy holds FROZEN up now: let the watch take the sample that sees it (it samples about once a second,
        # slower under load) before it is stopped.
        wait_for(f"{FROZEN} seen up again by the watch", lambda: watch.up_again_wall is not None, 30, every=0.5)
    finally:
        sim.exec(FROZEN, "kill", "-CONT", pid, check=False)
        records = load.stop()
        watch.stop.set()
        watch.join(timeout=10)
        sim.wait_all_ready()
    journal = watchdog_journal(sim, since)
    failed = _loadgen.failures(records)
    print(
        f"\n{FROZEN} frozen: the watchdog decided after {decided:.0f} s (limit {decide_within:.0f} s), the unit was "
        f"back {back:.0f} s later and generated {started:.0f} s after that; {len(records)} requests, "
        f"{len(failed)} failed; the proxy held {FROZEN} down "
        f"{(watch.down_at - frozen_at) if watch.down_at else float('nan'):.0f} s after the freeze\n{journal[-3000:]}"
    )
    assert API_KEY not in journal, "the watchdog's journal carries the API key"
    # Issue 19 item 5: the restarted engine was warmed by its watchdog before the proxy gave it clients. The unit
    # removed its marker at the start; the warm agent held the server DOWN (agent) until the warm-up wrote it.
    warmed = [line for line in journal.splitlines() if line.startswith(f"{UNIT}: warmed (warm-up 200 in ")]
    assert len(warmed) == 1, f"the watchdog did not warm the restarted engine once:\n{journal[-2000:]}"
    marker = warmed[0].rsplit("marker ", 1)[1].rstrip(")")
    marked = float(sim.exec(FROZEN, "stat", "-c", "%Y", marker).stdout.strip())
    assert watch.up_again_wall is not None, f"the proxy never held {FROZEN} up again"
    # The nodes share the host's clock; stat's %Y is whole seconds, the watch samples every second.
    assert watch.up_again_wall >= marked - 1.0, (
        f"the proxy held {FROZEN} up {marked - watch.up_again_wall:.1f} s before its warm-up marked it warm"
    )
    print(f"{warmed[0]}; the proxy held {FROZEN} up {watch.up_again_wall - marked:.1f} s after the marker")
    # spark-1 served in every 10 s from the freeze until spark-2 was back (its own counter, never through the proxy).
    counts = [(t, n) for t, n in watch.samples if frozen_at <= t <= back_at]
    assert counts and all(sample[1] is not None for sample in counts), f"{SERVING} stopped answering /metrics: {counts}"
    for start in range(0, int(back_at - frozen_at) - 10, 10):
        window = [n for t, n in counts if start <= t - frozen_at <= start + 10]
        assert window and window[-1] > window[0], f"{SERVING} served nothing from {start} s to {start + 10} s"
    # Only requests the proxy sent to the frozen replica before its health check took it out may fail.
    assert watch.down_at is not None, f"the proxy never held {FROZEN} down while it was frozen"
    late = [r for r in failed if r["start"] > watch.down_at + 1.0]
    assert not late, f"{len(late)} request(s) sent after the proxy held {FROZEN} down failed: {late[:3]}"
    assert len(failed) <= CONCURRENCY, f"more failures than requests in flight: {failed[:5]}"
