# Copyright: gb10.serving maintainers
# Apache-2.0
"""One served two-node simulation per test session, shared by every module in this folder.

The suite changes a serving site while it serves (rolling upgrade, topology switch, concurrency limits, the context
ladder, the floating proxy), so it needs the whole chain converged: that costs minutes, so it happens once. In
`make test` the molecule default scenario has already converged and proven the site idempotent; its verify runs this
suite against the scenario's nodes with GB10_IT_SIM_REUSE=1. Run alone (`make test-serving`), the fixture brings its
own simulation up under SIM_PREFIX (default gb10-it), converges site.yml, and tears it down at the end unless
GB10_IT_KEEP=1.

Two engines, one converge (issue 36): the site may have been converged with another profile than the suite's
(GB10_IT_CONVERGED_PROFILE; make test converges sim-real, the real vLLM engine, and the suite's changes serve
sim-replicas, the stand-in, whose restarts take seconds). The modules marked `converged_site` leave every engine's
configuration as they found it (a replica they kill comes back as it was) and run first, on the site as
converged. A module marked `moves_to_suite_profile` runs next: it starts from the site as
converged and leaves it on the suite's profile (test_90: its switch back to replicas). Every other module runs on
the suite's profile, the site moved there once if no module did (tests/integration/serving/serving_apply.yml with
the image). Every module leaves the site in replicas, every replica serving and READY.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import ansible_runner
import pytest
from _api import api_headers
from _profile import CONVERGED_PROFILE, PROFILE, engine_restart_s, toolcall_cases

REPO = Path(__file__).resolve().parents[3]
INVENTORY = REPO / "inventories" / "sim"
NODES = ("spark-1", "spark-2")
ADMIN_SOCKET = "/run/haproxy/admin.sock"


def _network_subnet_base(network):
    """The first three octets of a running simulation network's subnet (None when no such network runs)."""
    done = subprocess.run(
        ["docker", "network", "inspect", "-f", "{{range .IPAM.Config}}{{.Subnet}} {{end}}", network],
        capture_output=True,
        text=True,
        check=False,
    )
    subnets = done.stdout.split() if done.returncode == 0 else []
    if not subnets:
        return None
    return subnets[0].split("/", 1)[0].rsplit(".", 1)[0]


def _subnet_base(network, reuse):
    """SIM_SUBNET_BASE as given; else, reusing a running simulation, that simulation's own; else the suite's own."""
    if os.environ.get("SIM_SUBNET_BASE"):
        return os.environ["SIM_SUBNET_BASE"]
    if reuse:
        base = _network_subnet_base(network)
        if base is None:
            pytest.fail(f"GB10_IT_SIM_REUSE=1 but no network {network!r} runs: start it (make sim) or set SIM_PREFIX")
        return base
    return "10.83.0"


def _env():
    prefix = os.environ.get("SIM_PREFIX", "gb10-it")
    network = os.environ.get("SIM_NETWORK", prefix)
    env = {
        "SIM_PREFIX": prefix,
        "SIM_NETWORK": network,
        "SIM_SUBNET_BASE": _subnet_base(network, os.environ.get("GB10_IT_SIM_REUSE") == "1"),
        "SIM_NODES": str(len(NODES)),
        "GB10_SIM_IMAGES": os.environ.get("GB10_SIM_IMAGES", str(REPO / "sim" / "build" / "images.yml")),
        "GB10_SIM_WHEELHOUSE": os.environ.get("GB10_SIM_WHEELHOUSE", str(REPO / "sim" / "build" / "wheelhouse")),
        # The simulation's CA and per-subnet proxy certificate (sim/tls.py, made by sim/up.sh; inventories/sim).
        "GB10_SIM_TLS_DIR": os.environ.get("GB10_SIM_TLS_DIR", str(REPO / "sim" / "build" / "tls")),
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": str(REPO / "collections"),
        "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
    }
    return env


def slowest_tasks(events, count=5):
    """The run's ``count`` slowest task results as (seconds, host, task), from ansible-runner's own durations."""
    timed = [
        (data.get("duration") or 0.0, data.get("host", ""), data.get("task", ""))
        for event in events
        if event.get("event") in ("runner_on_ok", "runner_on_failed", "runner_on_skipped")
        for data in [event.get("event_data", {})]
    ]
    return sorted(timed, reverse=True)[:count]


def failures(runner):
    """The failed or unreachable tasks of a run, each with its host and message (the stdout tail where none)."""
    lines = []
    for event in runner.events:
        if event.get("event") in ("runner_on_failed", "runner_on_unreachable"):
            data = event["event_data"]
            if data.get("ignore_errors"):
                continue
            res = data.get("res", {})
            lines.append(f"{data.get('host')} | {data.get('task')}: {res.get('msg', '')}")
            for key in ("stderr", "stdout"):
                if res.get(key):
                    lines.append(f"  {key}: {str(res[key])[-1500:]}")
    return "\n".join(lines) or runner.stdout.read()[-6000:]


@dataclass
class ServedSim:
    """A converged two-node simulation and the handles a test needs to drive and observe it."""

    env: dict
    repo: Path = REPO
    inventory: Path = INVENTORY
    runs: list = field(default_factory=list)
    # ansible-runner's private data dirs (events are read from them lazily); removed when the session ends.
    scratch: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="gb10-it-"))
    slowest: list = field(default_factory=list)
    # The profile the site serves now: what it was converged with until serve_suite_profile() moves it.
    profile: str = CONVERGED_PROFILE

    @property
    def engine_restart_s(self):
        """Seconds a restarted replica of the engine the site serves now takes to generate again (with margin)."""
        return engine_restart_s(self.profile)

    @property
    def prefix(self):
        return self.env["SIM_PREFIX"]

    @property
    def subnet_base(self):
        return self.env["SIM_SUBNET_BASE"]

    def container(self, node):
        return f"{self.prefix}-{node}"

    def node_ip(self, node):
        # Nodes sit at base.(10+N) on the simulation's network (sim/lib/common.sh).
        return f"{self.subnet_base}.{10 + int(node.rsplit('-', 1)[1])}"

    @property
    def proxy_url(self):
        """The proxy on the first node, as a client reaches it: TLS only, with the simulation's certificate."""
        return self.proxy_at(self.node_ip(NODES[0]))

    def proxy_at(self, address):
        """The proxy's public frontend at ``address`` (a node's or the floating one; the certificate names both)."""
        return f"https://{address}:8080"

    @property
    def proxy_ca(self):
        """The simulation's CA (sim/tls.py; the inventory's proxy_tls_ca): what every client here verifies with."""
        return Path(self.env["GB10_SIM_TLS_DIR"]) / "ca.pem"

    @property
    def tls(self):
        """A client TLS context trusting the simulation's CA only, host names checked (urllib's ``context=``)."""
        return ssl.create_default_context(cafile=str(self.proxy_ca))

    def replica_url(self, node):
        return f"http://{self.node_ip(node)}:8000"

    def exec(self, node, *argv, check=True, timeout=300, input=None):
        return subprocess.run(
            ["docker", "exec", "-i", self.container(node), *argv],
            check=check,
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input,
        )

    def proxy_admin(self, command, node=NODES[0]):
        """One HAProxy runtime-API command on the proxy node's admin socket; its answer."""
        done = self.exec(node, "socat", "stdio", f"unix-connect:{ADMIN_SOCKET}", input=command + "\n", check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{node}: HAProxy runtime API `{command}` failed: {done.stdout}{done.stderr}")
        return done.stdout

    def playbook(self, path, extravars=None, limit=None, check=True, tags=None, cmdline=None):
        """Run a playbook of the checkout on the simulation with ansible-runner (the profile the site serves now).

        cmdline: more ansible-playbook options, e.g. "--check --diff" (test_29_check_mode).
        """
        playbook = Path(path)
        if not playbook.is_absolute():
            playbook = self.repo / playbook
        variables = {"serving_profile": self.profile, **(extravars or {})}
        private = tempfile.mkdtemp(prefix="runner-", dir=self.scratch)
        started = time.monotonic()
        runner = ansible_runner.run(
            private_data_dir=private,
            project_dir=str(self.repo),
            playbook=str(playbook),
            inventory=str(self.inventory),
            extravars=variables,
            limit=limit,
            tags=tags,
            cmdline=cmdline,
            envvars=self.env,
            quiet=True,
        )
        self.runs.append((playbook.name, runner.rc, round(time.monotonic() - started, 1)))
        self.slowest.append(slowest_tasks(runner.events))
        if check and runner.rc != 0:
            pytest.fail(f"{playbook.name} failed (rc={runner.rc}, status={runner.status}):\n{failures(runner)}")
        return runner

    def toolcall_gate(self, candidate, running, check=True):
        """playbooks/toolcall_gate.yml of ``candidate``'s replica against ``running``'s: (runner, the verdict)."""
        runner = self.playbook(
            "playbooks/toolcall_gate.yml",
            {
                "toolcall_gate_endpoint": self.replica_url(candidate),
                "toolcall_gate_running_endpoint": self.replica_url(running),
                "toolcall_gate_model": "tiny-moe",
                "toolcall_gate_cases_file": str(toolcall_cases(self.profile)),
            },
            check=check,
        )
        outcome = "runner_on_ok" if runner.rc == 0 else "runner_on_failed"
        for event in runner.events:
            data = event.get("event_data", {})
            if event.get("event") == outcome and data.get("task") == "Score and apply the gate":
                return runner, data["res"]
        raise AssertionError(f"the gate of {candidate} against {running} gave no verdict ({outcome})")

    def script(self, *argv):
        subprocess.run([str(self.repo / argv[0]), *argv[1:]], check=True, env={**os.environ, **self.env})

    def running_argv(self, node):
        """The command the node's replica container runs, as it was started (docker inspect's Config.Cmd)."""
        return json.loads(self.exec(node, "docker", "inspect", "-f", "{{json .Config.Cmd}}", "gb10-vllm").stdout)

    def running_seqs(self, node):
        """The --max-num-seqs the node's running replica was started with."""
        argv = self.running_argv(node)
        assert "--max-num-seqs" in argv, f"{node}: the replica runs without --max-num-seqs: {argv}"
        return int(argv[argv.index("--max-num-seqs") + 1])

    def served(self, node, timeout=10):
        """The replica's own /health answers 200."""
        try:
            with urllib.request.urlopen(f"{self.replica_url(node)}/health", timeout=timeout) as answer:
                return answer.status == 200
        except OSError:
            return False

    def proxies(self):
        """The nodes that run a proxy (both when the floating address is on, else the first)."""
        return [node for node in NODES if self.exec(node, "test", "-S", ADMIN_SOCKET, check=False).returncode == 0]

    def proxy_stats(self, node=NODES[0]):
        """{svname: row} of a proxy's serving backend from HAProxy's `show stat` (CSV)."""
        text = self.proxy_admin("show stat", node).lstrip("# ")
        return {row["svname"]: row for row in csv.DictReader(io.StringIO(text)) if row.get("pxname") == "vllm"}

    def backend_states(self, node=NODES[0]):
        """{server: (operational state, admin state)} of a proxy's serving backend, from `show servers state`."""
        lines = [line.split() for line in self.proxy_admin("show servers state", node).splitlines()]
        header = next((line[1:] for line in lines if line and line[0] == "#"), None)
        states = {}
        for line in lines:
            if header and line and line[0] != "#" and len(line) >= len(header):
                row = dict(zip(header, line, strict=False))
                states[row["srv_name"]] = (int(row["srv_op_state"]), int(row["srv_admin_state"]))
        return states

    def all_ready(self):
        """Every replica answers /health itself, and the proxy holds it UP (op state 2) and READY (no admin flag)."""
        try:
            views = [self.backend_states(proxy) for proxy in self.proxies() or [NODES[0]]]
        except RuntimeError:
            return False
        return all(self.served(node) for node in NODES) and all(
            states.get(node) == (2, 0) for states in views for node in NODES
        )

    def wait_all_ready(self, timeout=300):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.all_ready():
                return
            time.sleep(2)
        health = {node: self.served(node) for node in NODES}
        try:
            states = self.backend_states()
        except RuntimeError as exc:
            states = str(exc)
        pytest.fail(f"the site is not serving as expected: replica /health {health}, proxy (op, admin) {states}")

    def serve_suite_profile(self):
        """Move the site to the suite's profile where it serves another (once a session; a no-op after).

        The serving plan, image and FlashInfer module, units and proxy of PROFILE (serving_apply.yml with the image,
        as a test that comes back from another image does): each replica restarts on the suite's engine.
        """
        if self.profile == PROFILE:
            return
        started = time.monotonic()
        self.playbook(
            "tests/integration/serving/serving_apply.yml", {"serving_profile": PROFILE, "serving_apply_image": True}
        )
        self.profile = PROFILE
        self.wait_all_ready()
        print(
            f"\nthe site moved from {CONVERGED_PROFILE} to the suite's {PROFILE} in {time.monotonic() - started:.0f} s"
        )

    def chat(self, content="hello", max_tokens=8, url=None, timeout=120):
        body = json.dumps(
            {"model": "tiny-moe", "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens}
        ).encode()
        request = urllib.request.Request(
            f"{url or self.proxy_url}/v1/chat/completions", data=body, headers=api_headers()
        )
        # The context matters for the proxy's https only (a replica's own port is plain HTTP on the fabric).
        with urllib.request.urlopen(request, timeout=timeout, context=self.tls) as answer:
            return json.loads(answer.read())


@pytest.fixture(scope="session")
def served_sim():
    if os.environ.get("GB10_INTEGRATION_SKIP_SERVING") == "1":
        pytest.skip("GB10_INTEGRATION_SKIP_SERVING=1: the served-site suite runs in molecule default's verify")
    sim = ServedSim(env=_env())
    reuse = os.environ.get("GB10_IT_SIM_REUSE") == "1"
    if not reuse:
        sim.script("sim/up.sh")
        sim.script("sim/hub/up.sh")
        sim.script("sim/publish_image.sh")
        sim.playbook("site.yml")
    elif not (Path(sim.env["GB10_SIM_TLS_DIR"]) / sim.subnet_base / "proxy.pem").is_file():
        pytest.fail(
            f"GB10_IT_SIM_REUSE=1 but the simulation on {sim.subnet_base} has no TLS certificate in "
            f"{sim.env['GB10_SIM_TLS_DIR']}: it was started before the proxy spoke TLS. Run sim/up.sh (make sim-up) "
            "and converge it again (make sim-converge), then re-run"
        )
    try:
        sim.wait_all_ready()
        yield sim
        sim.wait_all_ready()
    finally:
        # GB10_IT_KEEP=1 keeps the nodes and every run's ansible-runner artifacts (printed below) for a look after.
        if os.environ.get("GB10_IT_KEEP") != "1":
            shutil.rmtree(sim.scratch, ignore_errors=True)
        else:
            print(f"ansible-runner artifacts kept in {sim.scratch}")
        if not reuse and os.environ.get("GB10_IT_KEEP") != "1":
            sim.script("sim/down.sh")
        # Where make test's budget goes: every playbook run of the session with its wall time (CI logs show it).
        lines = [f"  {seconds:7.1f} s  rc={rc}  {name}" for name, rc, seconds in sim.runs]
        total = sum(run[2] for run in sim.runs)
        print(f"\nserved_sim playbook runs ({len(sim.runs)}, {total:.0f} s):\n" + "\n".join(lines))
        for (name, _rc, seconds), tasks in zip(sim.runs, sim.slowest, strict=True):
            if seconds >= 60:
                shown = "; ".join(f"{took:.0f} s {host}: {task}" for took, host, task in tasks)
                print(f"  slowest tasks of {name} ({seconds:.0f} s): {shown}")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "converged_site: the module leaves every engine's configuration as it found it (a replica it kills comes back "
        "as it was); it runs first, on the site as converged (issue 36)",
    )
    config.addinivalue_line(
        "markers",
        "moves_to_suite_profile: the module starts from the site as converged and leaves it on the suite's profile "
        "(its last change serves that profile); it runs right after the converged_site modules",
    )


def _mine(path):
    return Path(str(path)).parent == Path(__file__).parent


def _phase(node):
    """0: on the site as converged; 1: moves it to the suite's profile; 2: on the suite's profile."""
    if node.get_closest_marker("converged_site") is not None:
        return 0
    return 1 if node.get_closest_marker("moves_to_suite_profile") is not None else 2


def pytest_collection_modifyitems(items):
    """This folder's modules by phase, each phase in name order: the site changes engine once."""
    mine = [item for item in items if _mine(item.path)]
    items[:] = [item for item in items if not _mine(item.path)] + sorted(mine, key=_phase)


@pytest.fixture(autouse=True, scope="module")
def _site_on_the_suite_profile(request):
    """The site on the suite's profile before a phase 2 module (ServedSim.serve_suite_profile: a no-op once there);
    after a phase 1 module, the site is known to serve it (the module's own restore ends there when it fails)."""
    if not _mine(request.path):
        yield
        return
    sim = request.getfixturevalue("served_sim")
    phase = _phase(request.node)
    if phase == 2:
        sim.serve_suite_profile()
    yield
    if phase == 1:
        sim.profile = PROFILE
