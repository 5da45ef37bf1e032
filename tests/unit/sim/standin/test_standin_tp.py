# Copyright: gb10.serving maintainers
# Apache-2.0
"""Tensor parallelism over Ray: vLLM's refusals, checked on plain data (no Ray needed)."""

from __future__ import annotations

import sys
import threading

import pytest
from vllm._standin import cli
from vllm._standin import tp as tpmod

HEAD, WORKER = "10.77.0.11", "10.77.0.12"


def node(ip, alive=True, gpus=1):
    return {"NodeManagerAddress": ip, "Alive": alive, "Resources": {"GPU": gpus, "CPU": 4}}


def rank(ip, node_id, ray_ip=None, error=None):
    return {"ip": ip, "ray_ip": ray_ip or ip, "node_id": node_id, "error": error, "bytes": 10}


def test_pitfall_tp_without_ray_backend():
    # Seed 004 pitfall 4: the mp default does not infer Ray from a live cluster.
    error = tpmod.world_size_error(2, None)
    assert str(error).startswith("ValueError: World size (2) is larger than the number of available GPUs (1)")
    assert tpmod.world_size_error(2, "ray") is None
    assert tpmod.world_size_error(1, None) is None


def test_placement_group_pins_the_first_bundle_to_the_driver_address():
    assert tpmod.placement_specs(2, HEAD) == [{"GPU": 1.0, f"node:{HEAD}": 0.001}, {"GPU": 1.0}]


def test_cluster_short_of_nodes_times_out_like_vllm():
    # vLLM waits for the placement group (PG_WAIT_TIMEOUT), then refuses with the GPU count; the stand-in adds why.
    problem = tpmod.placement_problem(HEAD, [node(HEAD), node(WORKER, alive=False)], 2)
    assert problem.startswith("2 GPUs needed, 1 on 1 alive Ray node(s)")
    assert tpmod.placement_problem(HEAD, [node(HEAD), node(WORKER)], 2) is None
    error = tpmod.placement_timeout_error(tpmod.placement_specs(2, HEAD), 60)
    assert str(error).startswith("ValueError: Cannot provide a placement group requiring 2.0 GPUs")
    assert "within 60 seconds" in str(error)
    assert "make sure the IP addresses used by ray cluster are the same as VLLM_HOST_IP" in tpmod.wait_message(10, [])


def test_driver_address_must_be_a_registered_node():
    # The head's Ray registered under another address: node:<VLLM_HOST_IP> never exists, the group never forms.
    problem = tpmod.placement_problem(HEAD, [node("172.17.0.1"), node(WORKER)], 2)
    assert "VLLM_HOST_IP=10.77.0.11" in problem and "172.17.0.1" in problem
    assert "--node-ip-address=10.77.0.11" in problem


def test_driver_node_without_a_free_gpu_is_refused():
    error = tpmod.driver_node_error({"CPU": 4.0}, "n1", HEAD)
    assert str(error).startswith("ValueError: Current node has no GPU available.")
    assert tpmod.driver_node_error({"GPU": 1.0}, "n1", HEAD) is None


def test_driver_node_outside_the_placement_group_is_refused():
    error = tpmod.bundles_error({0: "n2", 1: "n2"}, "n1", "pg")
    assert str(error).startswith("RuntimeError: driver node id n1 is not included in a placement group pg")
    assert tpmod.bundles_error({0: "n1", 1: "n2"}, "n1", "pg") is None


def test_pitfall_model_only_on_head():
    # Seed 004 pitfall 6: each rank loads its own node's shards; the worker's node lacks the model.
    error = tpmod.rank_problem(
        HEAD, [rank(HEAD, "a"), rank(WORKER, "b", error="RuntimeError: Cannot find any model weights with '/snap'")]
    )
    assert str(error).startswith(
        f"RuntimeError: ray::RayWorkerProc.initialize_worker() (ip={WORKER}) RuntimeError: Cannot find"
    )


def test_node_registered_under_another_address_is_refused():
    # Where vLLM would hang in NCCL init (seed 000: Ray registered the wrong address), the stand-in fails at once.
    error = tpmod.rank_problem(HEAD, [rank(HEAD, "a"), rank(WORKER, "b", ray_ip="172.17.0.1")])
    assert "the rank on Ray node 172.17.0.1 has VLLM_HOST_IP=10.77.0.12" in str(error)
    assert "--node-ip-address=10.77.0.12" in str(error)


def test_duplicate_addresses_are_refused_like_vllm():
    error = tpmod.rank_problem(HEAD, [rank(HEAD, "a"), rank(HEAD, "b")])
    assert "Every node should have a unique IP address. Got 2 nodes" in str(error)
    error = tpmod.rank_problem("10.77.0.13", [rank(HEAD, "a"), rank(WORKER, "b")])
    assert "Got 2 nodes with node ids ['a', 'b'] and 3 unique IP addresses" in str(error)
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


class _Engine:
    def __init__(self):
        self.wedged = threading.Event()


def test_a_lost_rank_kills_the_engine_by_default(capsys):
    engine, dead, stop = _Engine(), [], threading.Event()
    cli.rank_lost("exit", engine, dead, stop)("ActorDiedError: the actor died")
    assert (dead, stop.is_set(), engine.wedged.is_set()) == (["ActorDiedError: the actor died"], True, False)
    said = capsys.readouterr().out
    assert "EngineCore encountered a fatal error: a tensor-parallel rank is gone: ActorDiedError" in said


def test_pitfall_health_200_while_a_rank_is_dead_hang_mode_keeps_the_server_up(capsys):
    # vllm-project/vllm#16259, #53157: the API server stays up (no stop, no exit) and the engine generates nothing.
    engine, dead, stop = _Engine(), [], threading.Event()
    cli.rank_lost("hang", engine, dead, stop)("ActorDiedError: the actor died")
    assert (dead, stop.is_set(), engine.wedged.is_set()) == ([], False, True)
    out = capsys.readouterr().out
    assert "vllm-project/vllm#16259" in out and "fatal error" not in out


def test_an_unknown_rank_loss_mode_is_refused_at_start(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("GB10_STANDIN_RANK_LOSS", "retry")
    assert cli.main(["serve", str(tmp_path)]) == 1
    assert "GB10_STANDIN_RANK_LOSS='retry': expected one of exit, hang" in capsys.readouterr().err
