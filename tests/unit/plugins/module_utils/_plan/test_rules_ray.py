# Copyright: gb10.serving maintainers
# Apache-2.0
"""Ray fenced in tensor-parallel (issue 18): token auth, no dashboard, every port fixed, never left open."""

from __future__ import annotations

import pytest
from _plan_fixtures import only, replicas, run, tp

from ansible_collections.gb10.serving.plugins.module_utils._plan import ray as ray_mod

HEAD_PORTS = [
    "--port=6379",
    "--node-manager-port=6380",
    "--object-manager-port=6381",
    "--dashboard-agent-grpc-port=6382",
    "--dashboard-agent-listen-port=52365",
    "--metrics-export-port=6383",
    "--runtime-env-agent-port=6384",
    "--ray-client-server-port=10001",
    "--min-worker-port=10002",
    "--max-worker-port=10999",
]


def test_ray_start_fixes_every_port_and_turns_the_dashboard_off():
    result = run(tp())
    assert result["violations"] == []
    head, worker = result["nodes"]["spark-a"]["ray_start"], result["nodes"]["spark-b"]["ray_start"]
    assert head == [
        "ray",
        "start",
        "--head",
        "--node-ip-address=192.168.200.11",
        *HEAD_PORTS,
        "--num-gpus=1",
        "--include-dashboard=false",
        "--disable-usage-stats",
        "--block",
    ]
    # --port and --include-dashboard are head-only in ray start (it aborts a worker given them); the client server
    # runs on the head only.
    assert worker == [
        "ray",
        "start",
        "--address=192.168.200.11:6379",
        "--node-ip-address=192.168.200.12",
        *[w for w in HEAD_PORTS if not w.startswith(("--port=", "--ray-client-server-port="))],
        "--num-gpus=1",
        "--block",
    ]
    assert not any("dashboard-port" in w or "token" in w.lower() for w in head + worker)


def test_ray_auth_mode_is_in_every_ranks_env_and_the_token_nowhere_in_the_plan():
    result = run(tp())
    for entry in result["nodes"].values():
        assert entry["env"]["RAY_AUTH_MODE"] == "token"
        assert "RAY_AUTH_TOKEN" not in entry["env"]
    assert result["ray"] == {
        "auth": "token",
        "firewall": True,
        "ports": ray_mod.DEFAULT_PORTS,
        "worker_ports": [10002, 10999],
        "peers": ["192.168.200.11", "192.168.200.12"],
        "gcs_address": "192.168.200.11:6379",
        "listen": {
            "spark-a": [6379, 6380, 6381, 6382, 6383, 6384, 10001, 52365],
            "spark-b": [6380, 6381, 6382, 6383, 6384, 52365],
        },
    }
    assert run(replicas())["ray"] is None


def test_ray_ports_from_the_profile_reach_argv_and_the_fence():
    result = run(tp(ray={"ports": {"gcs": 7000, "min_worker": 20000, "max_worker": 20009}}))
    assert result["violations"] == []
    assert "--port=7000" in result["nodes"]["spark-a"]["ray_start"]
    assert result["nodes"]["spark-b"]["ray_start"][2] == "--address=192.168.200.11:7000"
    assert "--min-worker-port=20000" in result["nodes"]["spark-b"]["ray_start"]
    assert result["ray"]["worker_ports"] == [20000, 20009]
    assert result["ray"]["gcs_address"] == "192.168.200.11:7000"


@pytest.mark.parametrize(
    ("ray", "message"),
    [
        ({"auth": "password"}, "ray.auth 'password' must be token or disabled"),
        ({"ports": {"gcs": 80}}, "ray.ports.gcs 80 must be a port number from 1024 to 65535"),
        ({"ports": {"dashboard": 8265}}, "ray.ports.dashboard"),
        ({"ports": {"node_manager": 6379}}, "gcs and node_manager are all 6379"),
        ({"ports": {"client_server": 10050}}, "client_server (10050) lies in the worker range 10002-10999"),
        ({"ports": {"metrics_export": 8000}}, "metrics_export and vLLM's port are all 8000"),
        ({"ports": {"runtime_env_agent": 8265}}, "runtime_env_agent and Ray's reserved dashboard port are all 8265"),
        ({"ports": {"min_worker": 11000}}, "min_worker 11000 is above max_worker 10999"),
        ({"firewal": False}, "ray.firewal"),
    ],
)
def test_ray_settings(ray, message):
    violation = only(run(tp(ray=ray)), "ray_settings")
    assert message in violation["message"]


def test_ray_settings_judge_the_auth_mode_in_env_and_nothing_in_replicas():
    violation = only(run(tp(env={"RAY_AUTH_MODE": "disabled"})), "ray_settings")
    assert violation["value"] == "RAY_AUTH_MODE" and "ray.auth" in violation["message"]
    # replicas run no Ray: its settings are not judged there
    assert [v for v in run(replicas(ray={"auth": "password"}))["violations"] if v["rule"] == "ray_settings"] == []


def test_ray_open():
    violation = only(run(tp(ray={"auth": "disabled", "firewall": False})), "ray_open")
    assert "6379" in violation["message"] and "10002-10999" in violation["message"]
    assert "spark-a, spark-b" in violation["message"] and "ray.auth: token" in violation["message"]
    # one fence is enough to plan (both is the default); the plan says which one is up
    for fence in ({"auth": "disabled"}, {"firewall": False}):
        result = run(tp(ray=fence))
        assert result["violations"] == [], fence
    assert run(tp(ray={"auth": "disabled"}))["nodes"]["spark-a"]["env"]["RAY_AUTH_MODE"] == "disabled"
    assert run(replicas(ray={"auth": "disabled", "firewall": False}))["violations"] == []
