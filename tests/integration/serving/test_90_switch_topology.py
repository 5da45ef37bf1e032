# Copyright: gb10.serving maintainers
# Apache-2.0
"""The topology switch (seed 002, "what went wrong during the switch"), driven by playbooks/switch_topology.yml.

Replicas -> tensor_parallel over Ray (sim-tp-ray: the stand-in over a real CPU Ray cluster, because vLLM 0.32's CPU
platform refuses Ray: "current platform cpu does not support ray", sim/README.md): Ray's ports fenced, a wrong token
refused. Then, under load, Ray -> vLLM's own multi-node launch (sim-tp: the REAL vLLM 0.32 CPU engine, head on spark-1
serving, spark-2 --headless, no Ray): the group's ports fenced to its ranks; a killed headless rank brings the group
back by itself (its watchdogs and systemd, no Ansible); then back to replicas under load. Each switch under load: 0
failed requests from the first healthy backend on, the time with no healthy backend printed. It leaves the site in
replicas of the suite's profile with both replicas READY, even when it fails, so it runs right after the modules on
the site as converged (make test: the real engine's replicas, which its first switch retires): its way back to
replicas is the suite's one move to its own profile (conftest.py), and the nodes already hold the real engine's
image its mp leg serves.
"""

from __future__ import annotations

import json
import tempfile
import threading
import time
from pathlib import Path

import pytest
from _api import API_KEY
from _profile import ENGINE_RESTART_S, PROFILE
from _third_party import connect_from_third_container

from ansible_collections.gb10.serving.plugins.module_utils import _loadgen
from ansible_collections.gb10.serving.plugins.module_utils._plan import mp as _mp
from ansible_collections.gb10.serving.plugins.module_utils._plan import ray as _ray

pytestmark = pytest.mark.moves_to_suite_profile

SWITCH = "playbooks/switch_topology.yml"
NODES = ("spark-1", "spark-2")
MP_PROFILE, RAY_PROFILE = "sim-tp", "sim-tp-ray"
MP_UNITS = {"spark-1": ("gb10-vllm-mp.service",), "spark-2": ("gb10-vllm-mp-rank.service",)}
TP_UNITS = {"spark-1": ("gb10-ray-head.service", "gb10-vllm-tp.service"), "spark-2": ("gb10-ray-worker.service",)}
RAY_NODES = (
    "import json, ray; ray.init(address='auto', logging_level='ERROR'); "
    "print(json.dumps(sorted(n['NodeManagerAddress'] for n in ray.nodes() if n['Alive'])))"
)
# ray.init without the site's token: the cluster must refuse it (RAY_AUTH_MODE=token on every rank).
RAY_WRONG_TOKEN = "import ray; ray.init(address='auto', logging_level='ERROR'); print('CONNECTED')"


class Load:
    """Streaming chat requests through the proxy from ``concurrency`` threads until stopped (wall-clock stamps)."""

    def __init__(self, url, ca_path, concurrency=4):
        self.url, self.ca_path = url, ca_path
        self.records = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads = [threading.Thread(target=self._run, daemon=True) for _n in range(concurrency)]

    def _run(self):
        while not self._stop.is_set():
            record = _loadgen.one_request(
                self.url, "tiny-moe", "hello", 8, timeout=120, clock=time.time, api_key=API_KEY, ca_path=self.ca_path
            )
            with self._lock:
                self.records.append(record)
            if not record["ok"]:
                time.sleep(0.2)

    def __enter__(self):
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=180)
        return False


def _switch(sim, profile):
    report = Path(tempfile.mkdtemp(prefix="gb10-switch-")) / "switch.json"
    started = time.monotonic()
    sim.playbook(SWITCH, extravars={"serving_profile": profile, "switch_report": str(report)})
    measured = json.loads(report.read_text())
    measured["playbook_s"] = round(time.monotonic() - started, 1)
    return measured


def _unit(sim, node, unit):
    shown = sim.exec(node, "systemctl", "show", "-p", "ActiveState", "-p", "UnitFileState", unit).stdout
    return dict(line.split("=", 1) for line in shown.splitlines() if "=" in line)


def _restore_replicas(sim):
    if not sim.all_ready():
        sim.playbook(SWITCH, extravars={"serving_profile": PROFILE}, check=False)
    sim.wait_all_ready()


@pytest.fixture
def site(served_sim):
    try:
        yield served_sim
    finally:
        _restore_replicas(served_sim)


def _units_switched(site, units):
    """The old topology is disabled, not only stopped (seed 002); ``units`` ({node: units}) run, enabled."""
    for node in NODES:
        for unit in ("gb10-vllm.service", "gb10-watchdog-replica.timer"):
            assert _unit(site, node, unit).get("UnitFileState") != "enabled", (node, unit)
            assert _unit(site, node, unit).get("ActiveState") != "active", (node, unit)
        for unit in units[node]:
            assert _unit(site, node, unit) == {"ActiveState": "active", "UnitFileState": "enabled"}, (node, unit)


def _switch_under_load(site, profile, expected, old_units):
    """Switch to ``profile`` with 4 clients streaming through the proxy; ``expected`` (from, to, servers) as the
    playbook reports it; 0 failures after the first healthy backend, the downtime printed; ``old_units`` ({node:
    units}) of the old topology left disabled."""
    with Load(site.proxy_url, str(site.proxy_ca)) as load:
        time.sleep(5)
        switched = _switch(site, profile)
        time.sleep(5)
    print(f"{expected[0]} -> {expected[1]} ({profile}): {switched}")
    assert (switched["from"], switched["to"], switched["servers"]) == expected

    ready_at = float(switched["ready_at"])
    records = sorted(load.records, key=lambda r: r["start"])
    failed = [r for r in records if not r["ok"]]
    after = [r for r in records if r["start"] >= ready_at]
    failed_after = [r for r in after if not r["ok"]]
    first_fail = failed[0]["start"] if failed else None
    first_ok_after = next((r["end"] for r in records if r["ok"] and first_fail and r["start"] > first_fail), None)
    print(
        f"load through the proxy: {len(records)} requests, {len(failed)} failed in all; "
        f"no healthy backend (playbook) {switched['no_healthy_backend_s']} s; clients saw errors from "
        f"{0 if first_fail is None else first_fail - records[0]['start']:.1f} s to "
        f"{0 if first_ok_after is None else first_ok_after - records[0]['start']:.1f} s into the run; "
        f"after the first healthy backend: {len(after)} requests, {len(failed_after)} failed"
    )
    assert after, "no request was sent after the first healthy backend came back"
    assert not failed_after, failed_after[:3]
    for node in NODES:
        for unit in old_units[node]:
            assert _unit(site, node, unit).get("UnitFileState") != "enabled", (node, unit)
            assert _unit(site, node, unit).get("ActiveState") in ("inactive", "failed"), (node, unit)
    return switched


def _container_started(site, node, container):
    """The container's State.StartedAt (docker's RFC 3339 text), or "" where it does not exist."""
    done = site.exec(node, "docker", "inspect", "-f", "{{.State.StartedAt}}", container, check=False)
    return done.stdout.strip() if done.returncode == 0 else ""


def _chat_ok(site, timeout=30):
    try:
        return bool(site.chat("are you back?", max_tokens=4, timeout=timeout)["choices"])
    except (OSError, ValueError, KeyError):
        return False


def test_switch_to_ray_then_to_mp_on_the_real_engine_a_lost_rank_and_back_under_load(site):
    # Replicas -> tensor parallel over Ray (the stand-in: vLLM 0.32's CPU platform refuses Ray).
    to_ray = _switch(site, RAY_PROFILE)
    print(f"\nreplicas -> tensor_parallel (ray, stand-in): {to_ray}")
    assert (to_ray["from"], to_ray["to"], to_ray["servers"]) == ("replicas", "tensor_parallel", ["spark-1"])
    _units_switched(site, TP_UNITS)
    alive = json.loads(
        site.exec("spark-1", "docker", "exec", "gb10-ray-head", "python3", "-c", RAY_NODES).stdout.splitlines()[-1]
    )
    assert alive == sorted(site.node_ip(node) for node in NODES), alive
    _assert_ray_fenced(site)
    # Clients keep their one URL: the proxy now fronts the tensor-parallel endpoint.
    assert set(site.backend_states()) == {"spark-1"}
    answer = site.chat("hello from the split model")
    assert answer["choices"][0]["message"]["content"], answer
    # Switching to where the site already is changes nothing: molecule tensor_parallel's converge is this switch and
    # its idempotence step runs it again and requires changed=0 (here it cost 90 s of make test's budget).

    # Ray -> vLLM's own multi-node launch on the REAL engine, under load: a switch between launchers retires the Ray
    # units (disable --now) before the group starts again, and the fence follows the launcher.
    _switch_under_load(site, MP_PROFILE, ("tensor_parallel", "tensor_parallel", ["spark-1"]), TP_UNITS)
    _units_switched(site, MP_UNITS)
    # vLLM's own launch: the rank runs the same engine headless, and no Ray runs anywhere.
    inspect = ("docker", "inspect", "-f", "{{json .Args}}")
    rank_argv = json.loads(site.exec("spark-2", *inspect, "gb10-vllm-mp-rank").stdout)
    head_argv = json.loads(site.exec("spark-1", *inspect, "gb10-vllm-mp").stdout)
    assert "--headless" in rank_argv and "--headless" not in head_argv, (head_argv, rank_argv)
    for node in NODES:
        names = site.exec(node, "docker", "ps", "--format", "{{.Names}}").stdout.split()
        assert not [name for name in names if name.startswith("gb10-ray")], (node, names)
    _assert_mp_fenced(site)
    _assert_hardened(site, "spark-1", "gb10-vllm-mp", ipc="private")
    _assert_hardened(site, "spark-2", "gb10-vllm-mp-rank", ipc="private")
    assert set(site.backend_states()) == {"spark-1"}
    answer = site.chat("hello from the split model")
    assert answer["choices"][0]["message"]["content"] is not None, answer

    # A lost headless rank: the group serves again by itself (systemd and the watchdogs, no Ansible).
    before = _container_started(site, "spark-2", "gb10-vllm-mp-rank")
    killed_at = time.monotonic()
    site.exec("spark-2", "docker", "kill", "gb10-vllm-mp-rank")
    deadline = killed_at + 2 * ENGINE_RESTART_S + 300
    back_at = None
    while time.monotonic() < deadline:
        if _container_started(site, "spark-2", "gb10-vllm-mp-rank") not in ("", before) and _chat_ok(site):
            back_at = time.monotonic()
            break
        time.sleep(5)
    journal = site.exec("spark-1", "journalctl", "-u", "gb10-watchdog-mp.service", "--no-pager", "-n", "8").stdout
    print(
        f"killed headless rank: the group generated again {None if back_at is None else round(back_at - killed_at)}"
        f" s after the kill, without Ansible; head's watchdog:\n{journal}"
    )
    assert back_at is not None, f"the group did not serve again within {deadline - killed_at:.0f} s of the kill"
    site.exec("spark-1", "test", "-f", "/run/gb10-warm/mp")  # warmed again before the proxy takes it back

    # Back to replicas under load.
    _switch_under_load(site, PROFILE, ("tensor_parallel", "replicas", list(NODES)), MP_UNITS)
    low, high = _mp.DEFAULT_EPHEMERAL
    for node in NODES:
        # no tensor-parallel group in replicas: the fence (issue 37) keeps the replica's ports, not the group's
        table = site.exec(node, "nft", "list", "table", "inet", "gb10_fabric").stdout
        assert str(_mp.DEFAULT_MASTER_PORT) not in table and f"{low}-{high}" not in table, (node, table)
        assert "tcp dport 8000 accept" in table, (node, table)
    site.wait_all_ready()


def _assert_mp_fenced(site):
    """Issue 35: from a third container on the simulation's network every port vLLM's multi-node launch listens on
    (the master port on the head, the ranks' sockets in the ephemeral range) is refused, though it listens and the
    ranks reach each other (the group serves); the proxy answers the same container."""
    low, high = _mp.DEFAULT_EPHEMERAL
    head, rank = (site.node_ip(node) for node in NODES)
    for node, address in (("spark-1", head), ("spark-2", rank)):
        listening = sorted(
            {
                int(line.split()[3].rsplit(":", 1)[1])
                for line in site.exec(node, "ss", "-ltnH").stdout.splitlines()
                if len(line.split()) > 3
            }
        )
        fenced = [port for port in listening if port == _mp.DEFAULT_MASTER_PORT or low <= port <= high]
        if node == "spark-1":
            assert _mp.DEFAULT_MASTER_PORT in fenced, listening  # the master listens: a refusal below is the firewall
        seen = connect_from_third_container(site, address, [*fenced, 8080] if node == "spark-1" else fenced)
        opened = {port: state for port, state in seen.items() if state == "open" and port != 8080}
        print(f"\nthird container -> {node} {address}: the group's listening ports {fenced}, open: {opened or 'none'}")
        assert opened == {}, (node, opened)
        if node == "spark-1":
            assert seen[8080] == "open", seen[8080]  # the proxy answers it: the network is reachable
        table = site.exec(node, "nft", "list", "table", "inet", "gb10_fabric").stdout
        assert head in table and rank in table and f"{low}-{high}" in table, table
        assert str(_ray.DEFAULT_PORTS["gcs"]) not in table, table  # the fence followed the launcher: no Ray port


def _assert_hardened(site, node, container, ipc="host"):
    """The tensor-parallel containers run with every capability dropped but IPC_LOCK, no new privileges, and the
    host's IPC (Ray's object store across containers) or their own (``private``: vLLM's own launch)."""
    host_config = json.loads(site.exec(node, "docker", "inspect", "-f", "{{json .HostConfig}}", container).stdout)
    caps = {key: [c.removeprefix("CAP_") for c in host_config[key] or []] for key in ("CapDrop", "CapAdd")}
    assert caps == {"CapDrop": ["ALL"], "CapAdd": ["IPC_LOCK"]}, (container, caps)
    assert "no-new-privileges" in host_config["SecurityOpt"] and host_config["IpcMode"] == ipc, container


def _assert_ray_fenced(site):
    """Issue 18: from a third container on the simulation's network Ray's ports are refused, though Ray listens on
    them and the same container reaches the proxy; the nodes themselves formed the cluster (asserted above); a
    client without the site's token is refused too; the TP containers run hardened."""
    ports = _ray.DEFAULT_PORTS
    workers = list(range(ports["min_worker"], ports["max_worker"] + 1))
    head, worker = (site.node_ip(node) for node in NODES)
    listening = site.exec("spark-1", "ss", "-ltnH").stdout
    assert f":{ports['gcs']} " in listening, listening  # Ray's GCS is up: a refusal below is the firewall
    for node, address in (("spark-1", head), ("spark-2", worker)):
        fenced = _ray.listening_ports(ports, "ray_head" if node == "spark-1" else "ray_worker") + workers
        seen = connect_from_third_container(site, address, [*fenced, 8080] if node == "spark-1" else fenced)
        opened = {port: state for port, state in seen.items() if state == "open" and port != 8080}
        print(f"\nthird container -> {node} {address}: {len(fenced)} Ray ports, open: {opened or 'none'}")
        assert opened == {}, (node, opened)
        if node == "spark-1":
            assert seen[8080] == "open", seen[8080]  # the proxy answers it: the network is reachable
        table = site.exec(node, "nft", "list", "table", "inet", "gb10_fabric").stdout
        assert head in table and worker in table, table
    wrong = site.exec(
        "spark-1",
        "docker",
        "exec",
        "-e",
        "RAY_AUTH_TOKEN=" + "0" * 64,
        "gb10-ray-head",
        "timeout",
        "60",
        "python3",
        "-c",
        RAY_WRONG_TOKEN,
        check=False,
        timeout=120,
    )
    print(f"ray.init with a wrong token: rc={wrong.returncode} {(wrong.stderr or wrong.stdout)[-300:]!r}")
    assert wrong.returncode != 0 and "CONNECTED" not in wrong.stdout, wrong.stdout
    for container in ("gb10-ray-head", "gb10-vllm-tp"):
        _assert_hardened(site, "spark-1", container)
    modes = site.exec("spark-1", "stat", "-c", "%a %n", "/var/lib/gb10/ray", "/etc/gb10/serving/ray.env").stdout
    assert modes.split() == ["700", "/var/lib/gb10/ray", "600", "/etc/gb10/serving/ray.env"], modes


def _active(sim, node, unit):
    return _unit(sim, node, unit).get("ActiveState")


def _wait_stopped(sim, node, units, timeout=120):
    # Conflicts= queues the stop jobs; the start does not wait for them (docker stop takes a while).
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = {unit: _active(sim, node, unit) for unit in units}
        if all(state in ("inactive", "failed") for state in states.values()):
            return states
        time.sleep(1)
    return states


def test_pitfall_old_watchdog_restarts_the_other_topology(site):
    # Seed 002: the old topology's watchdog, only stopped, would start its replica again beside the new one. Back in
    # replicas after the switch, the tensor-parallel watchdog runs more times than its failure limit and starts nothing.
    for _run in range(4):
        site.exec("spark-1", "systemctl", "restart", "gb10-watchdog-tp.service", check=False)
    states = {unit: _active(site, "spark-1", unit) for unit in (*TP_UNITS["spark-1"], "gb10-vllm.service")}
    print(f"\nafter the tensor-parallel watchdog ran 4 times on spark-1: {states}")
    assert states["gb10-vllm.service"] == "active", states
    for unit in TP_UNITS["spark-1"]:
        assert states[unit] in ("inactive", "failed"), states
    site.wait_all_ready(timeout=60)


def test_pitfall_conflicting_unit_started_by_hand_stops_the_other_topology(site):
    # The units declare Conflicts= with the other topology's: an operator's start of a tensor-parallel unit stops the
    # replica on that node rather than running both on one GPU.
    node = "spark-2"
    for unit in TP_UNITS[node]:
        declared = site.exec(node, "systemctl", "show", "-p", "Conflicts", "--value", "gb10-vllm.service").stdout
        assert unit in declared.split(), (node, declared)
    try:
        site.exec(node, "systemctl", "start", "--no-block", *TP_UNITS[node])
        states = _wait_stopped(site, node, ["gb10-vllm.service"])
        print(f"\n{node} after starting {TP_UNITS[node]} by hand: {states}")
        assert states["gb10-vllm.service"] in ("inactive", "failed"), states
    finally:
        # A Ray worker whose head is not there ignores docker stop's SIGTERM for the whole --time (120 s measured):
        # the test's own cleanup kills it rather than wait.
        site.exec(node, "docker", "kill", "gb10-ray-worker", check=False)
        site.exec(node, "systemctl", "stop", *TP_UNITS[node], check=False)
        site.exec(node, "systemctl", "start", "gb10-vllm.service", check=False)
        site.wait_all_ready()
