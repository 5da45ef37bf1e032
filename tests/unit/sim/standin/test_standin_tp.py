# Copyright: gb10.serving maintainers
# Apache-2.0
"""Tensor parallelism over Ray: vLLM's refusals, checked on plain data (no Ray needed)."""

from __future__ import annotations

import sys

import pytest
from vllm._standin import cli
from vllm._standin import tp as tpmod

HEAD, WORKER = "10.77.0.11", "10.77.0.12"


def node(ip, alive=True, gpus=1):
    return {"NodeManagerAddress": ip, "Alive": alive, "Resources": {"GPU": gpus, "CPU": 4}}


def rank(ip, node_id, host_ip=None, error=None):
    return {"ip": ip, "node_id": node_id, "vllm_host_ip": host_ip or ip, "error": error, "bytes": 10}


def test_pitfall_tp_without_ray_backend():
    # Seed 004 pitfall 4: the mp default does not infer Ray from a live cluster.
    error = tpmod.world_size_error(2, None)
    assert str(error).startswith("ValueError: World size (2) is larger than the number of available GPUs (1)")
    assert tpmod.world_size_error(2, "ray") is None
    assert tpmod.world_size_error(1, None) is None


def test_cluster_short_of_nodes_is_refused():
    problem = tpmod.placement_problem(HEAD, [node(HEAD), node(WORKER, alive=False)], 2)
    assert problem.startswith("The number of required GPUs exceeds the total number of available GPUs")
    assert tpmod.placement_problem(HEAD, [node(HEAD), node(WORKER)], 2) is None


def test_driver_address_must_be_a_registered_node():
    problem = tpmod.placement_problem(HEAD, [node("172.17.0.1"), node(WORKER)], 2)
    assert "VLLM_HOST_IP=10.77.0.11" in problem and "172.17.0.1" in problem


def test_pitfall_model_only_on_head():
    # Seed 004 pitfall 6: each rank loads its own node's shards; the worker's node lacks the model.
    error = tpmod.rank_problem(
        HEAD, [rank(HEAD, "a"), rank(WORKER, "b", error="RuntimeError: Cannot find any model weights with '/snap'")]
    )
    assert str(error).startswith(
        f"RuntimeError: ray::RayWorkerProc.initialize_worker() (ip={WORKER}) RuntimeError: Cannot find"
    )


def test_node_registered_under_another_address_is_refused():
    error = tpmod.rank_problem(HEAD, [rank(HEAD, "a"), rank("172.17.0.1", "b", host_ip=WORKER)])
    assert "registered with Ray as 172.17.0.1 but its VLLM_HOST_IP is 10.77.0.12" in str(error)


def test_driver_without_a_rank_and_duplicate_addresses_are_refused():
    error = tpmod.rank_problem("10.77.0.13", [rank(HEAD, "a"), rank(WORKER, "b")])
    assert "Ray does not allocate any GPUs on the driver node.Driver IP: 10.77.0.13" in str(error)
    error = tpmod.rank_problem(HEAD, [rank(HEAD, "a"), rank(HEAD, "b")])
    assert "Every node should have a unique IP address. Got 2 nodes" in str(error)
    assert tpmod.rank_problem(HEAD, [rank(HEAD, "a"), rank(WORKER, "b")]) is None


def test_tp_without_ray_installed_fails_clearly(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.setenv("MAX_JOBS", "2")
    monkeypatch.setenv("GB10_STANDIN_STARTUP_S", "0")
    argv = ["serve", str(tmp_path), "--tensor-parallel-size", "2", "--distributed-executor-backend", "ray"]
    assert cli.main(argv) == 1
    assert "ValueError: Failed to import Ray" in capsys.readouterr().err


def test_tp_with_mp_backend_fails_like_vllm(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("MAX_JOBS", "2")
    assert cli.main(["serve", str(tmp_path), "-tp", "2"]) == 1
    assert "World size (2) is larger than the number of available GPUs (1)" in capsys.readouterr().err


@pytest.mark.parametrize("env", [{}, {"MAX_JOBS": ""}])
def test_pitfall_max_jobs_not_forwarded(monkeypatch, tmp_path, capsys, env):
    # Seed 004 pitfall 7: MAX_JOBS must reach every container; the stand-in refuses to start without it.
    monkeypatch.delenv("MAX_JOBS", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert cli.main(["serve", str(tmp_path)]) == 1
    assert "MAX_JOBS is not set" in capsys.readouterr().err
