# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/proxy's haproxy.cfg.j2 rendered from a small serving plan, for the proxy role's unit tests; and a real
HAProxy (Debian's 2.6, what the nodes run) started on a rendered configuration with its paths moved to a test's
folder."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import jinja2
import pytest
import yaml

ROLE = Path(__file__).resolve().parents[4] / "roles" / "proxy"
NEEDS_HAPROXY = pytest.mark.skipif(
    not shutil.which("haproxy"), reason="needs haproxy (apt-get install haproxy: Debian's 2.6, what the nodes run)"
)


def render(max_seqs=(12, 8), template="haproxy.cfg.j2", **overrides):
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    shared = yaml.safe_load((ROLE.parent / "gb10" / "defaults" / "main.yml").read_text())
    nodes = {f"spark-{i + 1}": {"port": 8000, "max_num_seqs": seqs} for i, seqs in enumerate(max_seqs)}
    # keep_trailing_newline: Ansible's template keeps a template's last newline (HAProxy refuses a file without it).
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(ROLE / "templates"), undefined=jinja2.StrictUndefined, keep_trailing_newline=True
    )
    variables = {
        "ansible_managed": "Ansible managed",
        "_proxy_plan": {"profile": "pair", "nodes": nodes},
        "_proxy_servers": sorted(nodes),
        "_proxy_errorfile": "/etc/haproxy/errors/gb10-503-queue.http",
        "_proxy_save_state_bin": "/usr/local/libexec/gb10/haproxy-save-state",
        "_proxy_api_keys_file": "/etc/haproxy/gb10-api-keys",
        "_proxy_anonymous": False,
        "_proxy_tls_cert": "",
        "hostvars": {host: {"gb10_fabric_address": f"192.168.200.{11 + i}"} for i, host in enumerate(sorted(nodes))},
        # the proxy node's own fabric address (HAProxy's Prometheus endpoint binds it)
        "gb10_fabric_address": "192.168.200.11",
        # roles/gb10's shared values the proxy writes (its admin socket, backend, ports, check path...)
        **{key: value for key, value in shared.items() if key.startswith("gb10_proxy_")},
        "gb10_warm_agent_port": shared["gb10_warm_agent_port"],
        **defaults,
    }
    variables.update(overrides)
    return env.get_template(template).render(**variables)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LiveHAProxy:
    """A real HAProxy in the foreground on the role's rendered configuration, in ``folder``; its runtime API."""

    def __init__(
        self, folder, max_seqs=(12, 8), api_key="unit-test-key", replica_port=None, agent_ports=None, **overrides
    ):
        self.folder = Path(folder)
        self.socket = str(self.folder / "admin.sock")
        self.state_file = str(self.folder / "server-state")
        errorfile = self.folder / "503.http"
        errorfile.write_text(render(template="503-queue.http.j2"))
        # Replicas on loopback ports where nothing listens: their checks fail, admin states are what is read here.
        hostvars = {f"spark-{i + 1}": {"gb10_fabric_address": "127.0.0.1"} for i in range(len(max_seqs))}
        # agent_ports: each replica's warm agent port (its node's gb10_warm_agent_port); none given, no agent check
        for host, port in zip(sorted(hostvars), agent_ports or [0] * len(hostvars), strict=False):
            hostvars[host]["gb10_warm_agent_port"] = port
        # The accepted key, as roles/proxy's configure writes it.
        keys = self.folder / "api-keys"
        keys.write_text(f"Bearer {api_key}\n")
        self.port = free_port()
        # HAProxy's Prometheus endpoint on the "fabric" address, here loopback.
        overrides.setdefault("gb10_fabric_address", "127.0.0.1")
        self.metrics_port = overrides.setdefault("gb10_proxy_metrics_port", free_port())
        self.config = self.folder / "haproxy.cfg"
        # replica_port: one port for every replica, or one port per replica (a list)
        ports = replica_port if isinstance(replica_port, (list, tuple)) else [replica_port or 8000] * len(max_seqs)
        plan = {
            "profile": "pair",
            "nodes": {f"spark-{i + 1}": {"port": ports[i], "max_num_seqs": seqs} for i, seqs in enumerate(max_seqs)},
        }
        self.config.write_text(
            render(
                max_seqs,
                _proxy_api_keys_file=str(keys),
                _proxy_plan=plan,
                gb10_proxy_admin_socket=self.socket,
                proxy_server_state_file=self.state_file,
                gb10_proxy_bind_address="127.0.0.1",
                gb10_proxy_port=self.port,
                gb10_proxy_stats_port=free_port(),
                _proxy_errorfile=str(errorfile),
                hostvars=hostvars,
                **overrides,
            )
        )
        self.process = None

    def check(self):
        return subprocess.run(["haproxy", "-c", "-f", str(self.config)], capture_output=True, text=True, check=False)

    def start(self):
        self.log = open(self.folder / "haproxy.log", "a")  # noqa: SIM115 - closed by stop()
        self.process = subprocess.Popen(["haproxy", "-db", "-f", str(self.config)], stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                self.ask("show info")
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise AssertionError(f"HAProxy did not answer on {self.socket}: {(self.folder / 'haproxy.log').read_text()}")

    def stop(self):
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None
            self.log.close()

    def ask(self, command):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(5)
            conn.connect(self.socket)
            conn.sendall(command.encode() + b"\n")
            chunks = []
            while data := conn.recv(65536):
                chunks.append(data)
        return b"".join(chunks).decode()
