# Copyright: gb10.serving maintainers
# Apache-2.0
"""The tensor-parallel group as vLLM runs it (issue 15 item 6): one share for every rank, KV from the smallest.

vLLM runs `vllm serve` on the head only; the head's --gpu-memory-utilization holds on every rank, so every rank
is judged at it and the tighter node is the real budget. Heads must split over the group's ranks.
"""

from __future__ import annotations

import importlib

import pytest
from _plan_fixtures import DELETE, node, nodes, only, plan_mod, replicas, rules, run, shipped, tp

tp_mod = importlib.import_module("ansible_collections.gb10.serving.plugins.module_utils._plan.tp")

TOTAL_GIB = 124608 / 1024


def _three_nodes():
    node_map = nodes()
    node_map["spark-c"] = node("192.168.200.13", 117500, 1)
    return node_map


def run3(profile, **kwargs):
    return run(profile, _three_nodes(), ray_workers=["spark-b", "spark-c"], **kwargs)


# --- one share for the group ------------------------------------------------------------------------------


def test_pitfall_tighter_node_is_the_real_budget_every_rank_at_the_heads_share():
    # The example before issue 15: 0.85 for the group and 0.80 on spark-b, the worker. vLLM runs spark-b at 0.85.
    result = run(tp(defaults__gpu_memory_utilization=0.85, nodes={"spark-b": {"gpu_memory_utilization": 0.80}}))
    assert rules(result) == ["tp_per_node_value", "memory_headroom"]
    worker = result["nodes"]["spark-b"]["memory"]
    assert worker["gpu_memory_utilization"] == 0.85
    assert worker["headroom_gib"] == pytest.approx(109.375 - 3 - 0.85 * TOTAL_GIB, abs=0.01)  # 2.94, not 9.02
    headroom = result["violations"][1]
    assert headroom["node"] == "spark-b" and headroom["value"] == pytest.approx(2.94, abs=0.01)
    assert "vLLM applies the head's --gpu-memory-utilization 0.85 to every rank" in headroom["message"]
    assert "lower the group's value (defaults.gpu_memory_utilization) to 0.83 or less" in headroom["message"]
    assert result["group"]["gpu_memory_utilization"] == 0.85
    assert result["group"]["tightest_node"] == "spark-b"


def test_pitfall_tp_per_node_value_on_a_worker_refused_not_folded():
    violation = only(run(tp(nodes={"spark-b": {"gpu_memory_utilization": 0.80}})), "tp_per_node_value")
    assert violation["node"] == "spark-b" and violation["value"] == 0.80
    message = violation["message"]
    assert "nodes.spark-b.gpu_memory_utilization is 0.8" in message
    assert "the group runs one value on every rank" in message
    assert "--gpu-memory-utilization is 0.83, from defaults.gpu_memory_utilization" in message
    assert "Remove nodes.spark-b.gpu_memory_utilization" in message and "at most 0.83" in message


def test_pitfall_tp_per_node_value_max_num_seqs_on_a_worker_refused():
    violation = only(run(tp(nodes={"spark-b": {"max_num_seqs": 4}})), "tp_per_node_value")
    assert violation["node"] == "spark-b" and "--max-num-seqs is 8" in violation["message"]


def test_share_set_on_the_head_is_the_groups_and_holds_on_every_rank():
    result = run(tp(nodes={"spark-a": {"gpu_memory_utilization": 0.80}}))
    assert result["violations"] == []
    argv = result["nodes"]["spark-a"]["argv"]
    assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.8"
    assert {entry["memory"]["gpu_memory_utilization"] for entry in result["nodes"].values()} == {0.80}
    assert result["group"]["set_by"] == "nodes.spark-a.gpu_memory_utilization"


def test_groups_share_refused_once_when_it_is_not_a_share():
    violation = only(run(tp(defaults__gpu_memory_utilization=1.2)), "gpu_memory_utilization")
    assert violation["node"] == "spark-a" and "tensor-parallel group's gpu_memory_utilization" in violation["message"]


def test_memory_of_every_rank_at_the_groups_share():
    result = run(tp())
    assert result["violations"] == []
    for entry in result["nodes"].values():
        assert entry["memory"]["gpu_memory_utilization"] == 0.83
        assert entry["memory"]["headroom_gib"] >= 5
    assert result["nodes"]["spark-b"]["memory"]["headroom_gib"] == pytest.approx(5.37, abs=0.005)


# --- KV tokens from the smallest rank ---------------------------------------------------------------------


def test_pitfall_tp_kv_tokens_from_the_smallest_rank():
    node_map = nodes()
    node_map["spark-b"]["facts"]["mem_total_mib"] = 122000  # less memory: a smaller budget at the same share
    result = run(tp(), node_map)
    assert result["violations"] == []
    head, worker = (result["nodes"][h]["memory"] for h in ("spark-a", "spark-b"))
    assert worker["kv_tokens"] < head["kv_tokens"]
    group = result["group"]
    assert group["kv_tokens"] == worker["kv_tokens"] and group["kv_tokens_ranks"] == ["spark-b"]
    assert group["requests_at_full_context"] == pytest.approx(worker["kv_tokens"] / 262144, abs=0.01)
    assert f"KV tokens of the group: {worker['kv_tokens']} (the smallest rank's, spark-b" in plan_mod.format_plan(
        result
    )


def test_pitfall_tp_kv_context_judged_once_for_the_group():
    violation = only(run(tp(context_length=2097152, model__max_position_embeddings=2097152)), "memory_kv_context")
    assert violation["node"] == "spark-a" and "the group's" in violation["message"]


# --- heads over the group's ranks -------------------------------------------------------------------------


def test_pitfall_tp_heads_divisible_three_nodes_over_a_four_head_model_refused():
    attention = {"kv_bytes_per_token": 6961, "num_heads": 4, "num_kv_heads": 2}
    violation = only(run3(tp(model__attention=attention)), "tp_heads_divisible")
    assert violation["node"] == "all" and violation["value"] == 3
    message = violation["message"]
    assert "Total number of attention heads (4) must be divisible by tensor parallel size (3)" in message
    assert "the tensor-parallel size (3) is not a multiple of the KV heads (2)" in message
    assert "make the group (gb10_ray_head + gb10_ray_workers) 2 nodes" in message
    assert "they do NOT split" in plan_mod.format_plan(run3(tp(model__attention=attention)))
    # the same model over two ranks fits
    assert run(tp(model__attention=attention))["violations"] == []


def test_pitfall_tp_heads_divisible_from_a_gqa_shape():
    shape = {"kind": "gqa", "num_layers": 4, "num_heads": 4, "num_kv_heads": 2, "head_dim": 64}
    assert "tp_heads_divisible" in rules(run3(tp(model__attention=shape)))
    result = run(tp(model__attention=shape))
    assert result["violations"] == [] and result["group"]["heads"]["checked"] is True


def test_heads_fit_split_or_replicated_as_vllm_does():
    assert tp_mod.heads_fit(4, 2, 2) == []
    assert tp_mod.heads_fit(4, 2, 4) == []  # 2 KV heads replicated twice over 4 ranks
    assert len(tp_mod.heads_fit(4, 2, 3)) == 2
    assert tp_mod.heads_fit(12, 6, 3) == tp_mod.heads_fit(12, 3, 3) == []
    (problem,) = tp_mod.heads_fit(24, 8, 3)
    assert "KV heads (8) do not divide by the tensor-parallel size (3)" in problem
    assert tp_mod.heads_fit(None, None, 3) == []
    assert tp_mod.fitting_sizes(4, 2, 4) == [2, 4]


def test_model_attention_heads_validated():
    bad = only(run(tp(model__attention={"kv_bytes_per_token": 6961, "num_heads": "four"})), "model_attention_heads")
    assert "num_heads must be a positive whole number of heads, got 'four'" in bad["message"]
    swapped = {"kv_bytes_per_token": 6961, "num_heads": 2, "num_kv_heads": 4}
    assert (
        "not a multiple of num_kv_heads 4"
        in only(run(tp(model__attention=swapped)), "model_attention_heads")["message"]
    )
    # a gqa shape whose num_kv_heads is not a number is refused once, as the shape
    shape = {"kind": "gqa", "num_layers": 4, "num_kv_heads": "x", "head_dim": 64}
    assert rules(run(tp(model__attention=shape))) == ["model_attention_shape"]


def test_heads_not_stated_are_said_to_be_unchecked():
    result = run(tp())
    assert result["group"]["heads"]["checked"] is False
    assert "heads: not checked against 2 ranks" in plan_mod.format_plan(result)


# --- the shipped profiles plan clean at the share vLLM uses -----------------------------------------------

SHIPPED = [
    ("example-pair", "glm-5.3-flash-tp2"),
    ("example-pair", "glm-replicas-mtp"),
    ("sim", "sim-replicas"),
    ("sim", "sim-tp"),
    ("sim", "sim-tp-ray"),
]


@pytest.mark.parametrize(("inventory", "profile"), SHIPPED)
def test_shipped_profiles_plan_clean(inventory, profile):
    site = shipped(inventory)
    result = plan_mod.plan(
        profile,
        site["profiles"],
        site["nodes"],
        fabric_cidr=site["fabric_cidr"],
        ray_head=site["ray_head"],
        ray_workers=site["ray_workers"],
    )
    assert result["violations"] == [], plan_mod.format_plan(result)
    for entry in result["nodes"].values():
        assert entry["memory"]["headroom_gib"] >= entry["memory"]["margin_gib"]
    if result["topology"] == "tensor_parallel":
        share = result["group"]["gpu_memory_utilization"]
        head_argv = result["nodes"][site["ray_head"]]["argv"]
        assert head_argv[head_argv.index("--gpu-memory-utilization") + 1] == f"{share:g}"
        assert {entry["memory"]["gpu_memory_utilization"] for entry in result["nodes"].values()} == {share}
        # sim-tp states its heads (sim/model's config.json); the example's illustrative model does not
        assert result["group"]["heads"]["checked"] is (inventory == "sim")
        # every shipped tensor-parallel profile is on vLLM's own launch but sim-tp-ray, which keeps Ray's units proved
        assert result["launcher"] == ("ray" if profile == "sim-tp-ray" else "mp")
        assert (result["ray"] is None) == (result["launcher"] == "mp") and result["fence"]["firewall"] is True


def test_example_tp_pair_at_the_share_vllm_uses():
    site = shipped("example-pair")
    result = plan_mod.plan(
        "glm-5.3-flash-tp2",
        site["profiles"],
        site["nodes"],
        **{k: site[k] for k in ("fabric_cidr", "ray_head", "ray_workers")},
    )
    group = result["group"]
    # 0.82, not 0.83: each mp rank's 1 GiB /dev/shm (the plan's default) counts in its memory table
    assert group["gpu_memory_utilization"] == 0.82 and group["set_by"] == "defaults.gpu_memory_utilization"
    assert group["tightest_node"] == "spark-b" and group["headroom_gib"] == pytest.approx(5.59, abs=0.005)
    assert not (site["profiles"]["glm-5.3-flash-tp2"].get("nodes") or {}).get("spark-b")


# --- one test per rule of rules_tp.py, named after the rule -----------------------------------------------


def test_tp_fabric_cidr():
    violation = only(run(tp(), fabric_cidr="fabric"), "tp_fabric_cidr")
    assert violation["value"] == "fabric" and "192.168.200.0/24" in violation["message"]


def test_tp_node_ip():
    node_map = nodes()
    node_map["spark-b"]["fabric_address"] = "spark-b.local"
    result = run(tp(), node_map)
    violation = next(v for v in result["violations"] if v["rule"] == "tp_node_ip")
    assert violation["node"] == "spark-b" and "not an IP address" in violation["message"]


def test_tp_vllm_host_ip():
    violation = only(run(tp(env={"VLLM_HOST_IP": "192.168.200.12"})), "tp_vllm_host_ip")
    assert violation["node"] == "spark-a" and violation["value"] == "192.168.200.12"


def test_tp_socket_ifname():
    result = run(tp(env={"GLOO_SOCKET_IFNAME": "ib0"}))
    assert rules(result) == ["tp_socket_ifname", "tp_socket_ifname"]
    assert {v["node"] for v in result["violations"]} == {"spark-a", "spark-b"}


def test_tp_ray_memory_monitor():
    result = run(tp(env={"RAY_memory_monitor_refresh_ms": "1000"}))
    assert [(v["rule"], v["value"]) for v in result["violations"]] == [("tp_ray_memory_monitor", "1000")] * 2


def test_tp_executor_backend():
    # the launcher decides the backend: one that disagrees with it is refused, either way round
    violation = only(run(tp(**{"vllm_options__distributed-executor-backend": "mp"})), "tp_executor_backend")
    assert violation["value"] == "mp" and "World size (2)" in violation["message"]
    assert "the group's launcher is ray (set by the profile)" in violation["message"]
    violation = only(run(tp(launcher="mp")), "tp_executor_backend")
    assert violation["value"] == "ray" and "the group's launcher is mp (set by the profile)" in violation["message"]
    violation = only(run(tp(launcher=DELETE)), "tp_executor_backend")
    assert violation["value"] == "ray" and "the group's launcher is mp (the default" in violation["message"]
    # one that agrees is written once, by the launcher
    for launcher, backend in (("ray", "ray"), ("mp", "mp")):
        result = run(tp(launcher=launcher, **{"vllm_options__distributed-executor-backend": backend}))
        assert result["violations"] == [], launcher
        for entry in result["nodes"].values():
            if entry["argv"]:
                assert entry["argv"].count("--distributed-executor-backend") == 1, launcher
                assert entry["argv"][entry["argv"].index("--distributed-executor-backend") + 1] == backend
    # replicas run no group: the option is vLLM's own there
    assert "tp_executor_backend" not in rules(run(replicas(**{"vllm_options__distributed-executor-backend": "ray"})))


def test_tp_heads_divisible():
    violation = only(run(tp(model__attention={"kv_bytes_per_token": 6961, "num_heads": 3})), "tp_heads_divisible")
    assert violation["value"] == 2 and "attention heads (3) do not divide" in violation["message"]


def test_tp_per_node_value():
    violation = only(run(tp(nodes={"spark-b": {"max_num_seqs": 16}})), "tp_per_node_value")
    assert violation["node"] == "spark-b" and violation["value"] == 16
    assert "Remove nodes.spark-b.max_num_seqs" in violation["message"]
