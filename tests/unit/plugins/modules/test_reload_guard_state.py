# Copyright: gb10.serving maintainers
# Apache-2.0
"""The reload_guard_state module on a fake /dev in tmp: real character device nodes (mknod) and real links."""

from __future__ import annotations

import http.server
import importlib
import os
import socketserver
import stat
import threading
import urllib.request
from pathlib import Path

import pytest
from module_harness import run_main

reload_guard_state = importlib.import_module("ansible_collections.gb10.serving.plugins.modules.reload_guard_state")


def _no_commands(self, cmd, **_kwargs):
    raise AssertionError(f"reload_guard_state runs no command: {cmd}")


@pytest.fixture
def dev(tmp_path):
    try:
        os.mknod(tmp_path / "nvidiactl", 0o600 | stat.S_IFCHR, os.makedev(195, 255))
        os.mknod(tmp_path / "nvidia0", 0o600 | stat.S_IFCHR, os.makedev(195, 0))
    except PermissionError:
        pytest.skip("mknod needs CAP_MKNOD")
    (tmp_path / "nvidia-not-a-device").write_text("")
    (tmp_path / "char").mkdir()
    return tmp_path


def _run(dev, tmp_path, **args):
    rule = tmp_path / "71-nvidia-dev-char.rules"
    base = {"node": "spark-1", "cgroup_driver": "systemd", "dev_dir": str(dev), "udev_rule": str(rule)}
    base["daemon_json"] = str(tmp_path / "daemon.json")
    return run_main(reload_guard_state.main, {**base, **args}, _no_commands)


def test_pitfall_daemon_reload_detaches_gpu_module_reads_devices_and_links(dev, tmp_path):
    found = _run(dev, tmp_path)
    assert found["devices"] == 2 and not found["guarded"]
    assert sorted(found["missing_links"]) == [f"195:0 -> {dev}/nvidia0", f"195:255 -> {dev}/nvidiactl"]
    assert found["problem"].startswith("spark-1: Docker uses the systemd cgroup driver with 2 NVIDIA device node(s)")
    # what nvidia-ctk makes: /dev/char/195:255 -> ../nvidiactl
    os.symlink("../nvidiactl", dev / "char" / "195:255")
    os.symlink("../nvidia0", dev / "char" / "195:0")
    (tmp_path / "71-nvidia-dev-char.rules").write_text(found["rule"] + "\n")
    found = _run(dev, tmp_path)
    assert found["guarded"] and found["missing_links"] == [] and found["problem"] is None
    assert found["changed"] is False


def test_pitfall_daemon_reload_detaches_gpu_module_cgroupfs_holds(dev, tmp_path):
    assert _run(dev, tmp_path, cgroup_driver="cgroupfs")["guarded"]


INFO = Path(__file__).resolve().parents[2] / "fixtures" / "reload_guard"


class _EngineInfo(http.server.BaseHTTPRequestHandler):
    """Docker's GET /info over its socket, answered with a real engine's answer (Docker 20.10.24, API 1.41)."""

    driver = "systemd"

    def do_GET(self):
        body = (INFO / f"docker_info_api_20.10.24_{self.driver}_driver.json").read_bytes()
        self.send_response(200 if self.path == "/info" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args):
        pass


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        request, _address = super().get_request()
        return request, ("local", 0)  # http.server logs a (host, port) client address


def test_the_cgroup_driver_asked_of_the_engine_over_its_socket_in_the_same_module_run(dev, tmp_path):
    """One module run where ansible.builtin.uri asked the engine first: GET /info over the engine's unix socket."""
    socket_path = str(tmp_path / "docker.sock")
    server = _UnixHTTPServer(socket_path, _EngineInfo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        asked = _run(dev, tmp_path, cgroup_driver=None, docker_socket=socket_path)
        assert asked["driver"] == "systemd" and not asked["guarded"]
        _EngineInfo.driver = "cgroupfs"
        assert _run(dev, tmp_path, cgroup_driver=None, docker_socket=socket_path)["guarded"]
    finally:
        _EngineInfo.driver = "systemd"
        server.shutdown()
        server.server_close()


def test_an_engine_that_does_not_answer_fails_with_the_node_and_the_fix(dev, tmp_path):
    failed = _run(dev, tmp_path, cgroup_driver=None, docker_socket=str(tmp_path / "no-engine.sock"))
    assert failed["failed"]
    assert failed["msg"].startswith(f"spark-1: the Docker engine at {tmp_path}/no-engine.sock did not answer GET /info")
    assert "systemctl status docker" in failed["msg"]


def test_asking_the_engine_leaves_the_process_urllib_alone(dev, tmp_path):
    """The engine is asked over its own connection: nothing process-wide changes (ansible's open_url with unix_socket
    installs its opener for every later urlopen of the process)."""
    before = urllib.request._opener  # the process-wide opener urlopen uses
    _run(dev, tmp_path, cgroup_driver=None, docker_socket=str(tmp_path / "no-engine.sock"))
    assert urllib.request._opener is before
