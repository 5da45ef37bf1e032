# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 39, items 3 and 4: the fabric values a tensor-parallel group is measured against, and the NCCL its ranks
load (vllm-project/vllm#42354, #41725, #52504)."""

from __future__ import annotations

from _plan_fixtures import mp, only, replicas, rules, run, tp


def test_fabric_settings():
    found = only(run(mp(fabric={"mtu": 12000})), "fabric_settings")
    assert "fabric.mtu is 12000" in found["message"]
    found = only(run(mp(fabric={"bandwidth_floor_gbit": "fast"})), "fabric_settings")
    assert "fabric.bandwidth_floor_gbit is 'fast'" in found["message"]
    assert rules(run(mp(fabric={"measure_seconds": 0}))) == ["fabric_settings"]


def test_pitfall_fabric_plan_entry_names_every_rank():
    result = run(mp(fabric={"mtu": 9000, "bandwidth_floor_gbit": 40}))
    assert result["violations"] == []
    fabric = result["fabric"]
    assert fabric["head"] == "spark-a" and set(fabric["ranks"]) == {"spark-a", "spark-b"}
    assert fabric["ranks"]["spark-b"]["interface"] == "enp1s0f0np0"
    assert fabric["mtu"] == 9000 and fabric["bandwidth_floor_gbit"] == 40.0 and fabric["measure_seconds"] == 3
    # the GB10 default floor (dgx-spark-playbooks#102's ~3 GB/s link is below it), no MTU stated
    default = run(mp())["fabric"]
    assert default["mtu"] is None and default["bandwidth_floor_gbit"] == 25.0
    assert run(replicas())["fabric"] is None


def test_tp_nccl_below_minimum():
    found = only(run(mp(image__critical_pins={"nvidia-nccl-cu13": "2.28.9"})), "tp_nccl_below_minimum")
    assert "pinned to nvidia-nccl-cu13 2.28.9, below 2.30.4" in found["message"]
    assert "vllm-project/vllm#52504" in found["message"] and "enforce-eager" in found["message"]


def test_pitfall_nccl_builds_differ_minimum_holds_with_graphs_only():
    pins = {"nvidia_nccl_cu13": "2.28.9"}
    assert rules(run(mp(image__critical_pins=pins, **{"vllm_options__enforce-eager": True}))) == []
    assert (
        rules(run(mp(image__critical_pins=pins, **{"vllm_options__compilation-config": {"cudagraph_mode": "NONE"}})))
        == []
    )
    assert rules(run(mp(image__critical_pins={"nvidia-nccl-cu13": "2.30.4"}))) == []
    # a profile's own minimum
    found = only(
        run(mp(image__critical_pins={"nvidia-nccl-cu13": "2.30.4"}, image__nccl_min_version="2.30.7")),
        "tp_nccl_below_minimum",
    )
    assert "below 2.30.7" in found["message"]
    # replicas run no collective across nodes
    assert rules(run(replicas(image__critical_pins=pins))) == []


def test_tp_nccl_outside_image():
    found = only(run(tp(env={"VLLM_NCCL_SO_PATH": "/usr/lib/aarch64-linux-gnu/libnccl.so.2"})), "tp_nccl_outside_image")
    assert "vllm-project/vllm#41725" in found["message"] and found["node"] == "all"
    assert rules(run(tp(env={"LD_PRELOAD": "/usr/lib/aarch64-linux-gnu/libnccl.so.2"}))) == ["tp_nccl_outside_image"]
    assert rules(run(tp(env={"LD_LIBRARY_PATH": "/opt/other"}))) == []


def test_nccl_versions_compare_as_release_numbers_without_packaging():
    from _plan_fixtures import plan_mod

    below = plan_mod.fabric.below
    assert below("2.28.9", "2.30.4") and not below("2.30.4", "2.30.4") and not below("2.30.10", "2.30.4")
    assert below("2.30", "2.30.4") and not below("3", "2.30.4")
    assert below("latest", "2.30.4") is None
    found = only(run(mp(image__critical_pins={"nvidia-nccl-cu13": "latest"})), "tp_nccl_below_minimum")
    assert "is not a version" in found["message"]


def test_the_plan_imports_without_packaging():
    """The nodes import the plan (plugins/modules through module_utils) before python3-packaging is installed."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    collections = Path(__file__).resolve().parents[5] / "collections"
    code = (
        "import sys; sys.modules['packaging'] = None; "
        "import ansible_collections.gb10.serving.plugins.module_utils._plan"
    )
    env = dict(os.environ, PYTHONPATH=str(collections))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, env=env)
    assert done.returncode == 0, done.stderr


def test_pitfall_nccl_builds_differ_plan_entry_gives_the_cited_gb10_default():
    """A tensor-parallel profile that states no NCCL minimum gets the field's cited one (the issue asks to refuse a
    build below a profile's minimum, and names the field's NCCL >= 2.30.4 with multi-node CUDA graphs): what
    roles/serving_image holds each rank's recorded NCCL to."""
    check = run(mp())["nccl"]
    assert check["ranks"] == ["spark-a", "spark-b"] and check["min_version"] == "2.30.4" and check["cuda_graphs"]
    assert "vllm-project/vllm#42354, #41725, #52504" in check["min_source"]
    stated = run(mp(image__nccl_min_version="2.31.0"))["nccl"]
    assert (stated["min_version"], stated["min_source"]) == ("2.31.0", "image.nccl_min_version")
    assert run(mp(**{"vllm_options__enforce-eager": True}))["nccl"]["cuda_graphs"] is False
    assert run(replicas())["nccl"] is None
    # a stated minimum that is no version is refused by the plan
    found = only(run(mp(image__nccl_min_version="latest")), "tp_nccl_below_minimum")
    assert "image.nccl_min_version latest is not a version" in found["message"]


def test_pitfall_fabric_far_below_rated_speed_plan_report_says_the_floor_and_where_it_is_measured():
    from _plan_fixtures import plan_mod

    text = plan_mod.format_plan(run(mp(fabric={"mtu": 9000, "bandwidth_floor_gbit": 40})))
    [fabric] = [line for line in text.splitlines() if line.startswith("fabric: ")]
    assert fabric.startswith("fabric: MTU 9000 on every rank, checked by node_preflight; bandwidth floor 40 Gbit/s")
    assert "roles/serving (tasks/fabric.yml), which prints 'fabric bandwidth: <rank> -> spark-a" in fabric
    [nccl] = [line for line in text.splitlines() if line.startswith("nccl: ")]
    assert "minimum 2.30.4 (the GB10 default" in nccl and "held: CUDA graphs span the nodes" in nccl
    assert not [line for line in plan_mod.format_plan(run(replicas())).splitlines() if line.startswith("fabric")]
