# Copyright: gb10.serving maintainers
# Apache-2.0
"""The serving plan refuses every field-report pitfall, with node, numbers and fix (DESIGN section 3).

Test names carry the pitfall they pin down, so `grep -r pitfall_ tests/` finds each one.
"""

from __future__ import annotations

import json

import pytest
from _plan_fixtures import (
    DELETE,
    REVISION,
    catalog_mod,
    memory_mod,
    node,
    nodes,
    only,
    plan_mod,
    replicas,
    rules,
    run,
    tp,
)

# --- the clean profiles -----------------------------------------------------------------------------------


def test_clean_tensor_parallel_profile_has_no_violations_and_full_outputs():
    result = run(tp())
    assert result["violations"] == []
    head, worker = result["nodes"]["spark-a"], result["nodes"]["spark-b"]
    assert head["role"] == "ray_head" and worker["role"] == "ray_worker"
    assert head["argv"][:3] == [
        "vllm",
        "serve",
        "/root/.cache/huggingface/hub/models--LibertAIDAI--GLM-5.3-Flash-NVFP4/snapshots/" + REVISION,
    ]
    assert worker["argv"] == []
    assert worker["ray_start"][:3] == ["ray", "start", "--address=192.168.200.11:6379"]
    assert "--node-ip-address=192.168.200.12" in worker["ray_start"]
    assert set(head["memory"]) >= {"mem_total_gib", "budget_gib", "weights_gib", "drafter_gib", "kv_cache_gib"}
    assert head["memory"]["weights_gib"] == pytest.approx(181.3 / 2, abs=0.01)


def test_clean_replicas_profile_has_no_violations():
    result = run(replicas())
    assert result["violations"] == []
    assert all(entry["role"] == "replica" and entry["ray_start"] == [] for entry in result["nodes"].values())


def test_replica_gloo_listeners_stay_on_loopback():
    # A replica's vLLM worker makes gloo groups, whose listeners otherwise take the address the host name resolves to
    # (measured on the simulation: 15 ports of VLLM::Worker on the node's LAN address, open to a third host).
    assert {entry["env"]["GLOO_SOCKET_IFNAME"] for entry in run(replicas())["nodes"].values()} == {"lo"}
    # tensor parallel ranks keep the fabric interface their group talks over
    assert {entry["env"]["GLOO_SOCKET_IFNAME"] for entry in run(tp())["nodes"].values()} != {"lo"}


def test_plan_names_who_serves_and_the_tool_call_parser_so_no_playbook_parses_argv_back():
    result = run(tp())
    head, worker = result["nodes"]["spark-a"], result["nodes"]["spark-b"]
    assert (head["serves"], head["tool_call_parser"]) == (True, "glm47")
    assert (
        "--tool-call-parser" in head["argv"] and head["argv"][head["argv"].index("--tool-call-parser") + 1] == "glm47"
    )
    assert (worker["serves"], worker["tool_call_parser"]) == (False, None)
    assert result["serving_hosts"] == ["spark-a"]
    assert run(replicas())["serving_hosts"] == ["spark-a", "spark-b"]


# --- profile choice ---------------------------------------------------------------------------------------


def test_pitfall_no_default_profile():
    result = plan_mod.plan(None, {"a": tp(), "b": replicas()}, nodes())
    violation = only(result, "profile_missing")
    assert "-e serving_profile=" in violation["message"] and "a, b" in violation["message"]


def test_unknown_profile_lists_the_inventory_profiles():
    result = plan_mod.plan("glm", {"glm-tp2": tp(), "glm-replicas": replicas()}, nodes())
    violation = only(result, "profile_unknown")
    assert "glm-replicas, glm-tp2" in violation["message"]


# --- image ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "ref",
    [
        "ghcr.io/example-org/spark-vllm:latest",
        "ghcr.io/example-org/spark-vllm:0.32.0@sha256:" + "ab" * 32,
        "registry:5000/gb10/vllm-standin",
        "ghcr.io/example-org/spark-vllm@sha256:abc",
    ],
)
def test_pitfall_image_tag_refused_digest_only(ref):
    violation = only(run(tp(image__ref=ref)), "image_not_digest")
    assert violation["value"] == ref and "@sha256:" in violation["message"]


def test_image_with_registry_port_and_digest_accepted():
    assert run(tp(image__ref="registry:5000/gb10/vllm-standin@sha256:" + "0" * 64))["violations"] == []


def test_unknown_vllm_release_plans_with_its_options_unchecked_until_the_image_gives_its_catalog():
    # issue 38 item 2: a release the collection has no catalog of is not refused here; the serving-image gate builds
    # the catalog from the image's own parser and plans again, and the roles that start vLLM refuse a pending plan
    result = run(tp(image__vllm_version="0.1.0", **{"vllm_options__kv-cache-memory": "3G"}))
    assert result["violations"] == []
    catalog = result["vllm_catalog"]
    assert catalog["source"] == "pending" and catalog["version"] == "0.1.0" and catalog["path"] is None
    assert "0.32.0" in catalog["reason"] and "0.33.0" in catalog["reason"]
    assert "vllm_options NOT checked yet" in plan_mod.format_plan(result)


def test_a_catalog_the_gate_built_from_the_image_checks_the_options(tmp_path):
    shipped = catalog_mod.load("0.32.0")
    options = {name: spec for name, spec in shipped["options"].items() if name != "--tool-call-parser"}
    built = {**shipped, "vllm_version": "0.1.0", "options": options, "generated_from": "registry:5000/x@sha256:00"}
    (tmp_path / "vllm-0.1.0.json").write_text(json.dumps(built))
    result = run(tp(image__vllm_version="0.1.0"), image_catalog_dir=str(tmp_path))
    violation = only(result, "vllm_flag_unknown")
    assert violation["value"] == "--tool-call-parser"
    assert violation["message"].startswith("--tool-call-parser is not an option of vLLM 0.1.0 ")
    assert "(vLLM 0.31.0 and 0.32.0 and 0.33.0 have it)" in violation["message"]
    catalog = result["vllm_catalog"]
    assert catalog["source"] == "image" and catalog["path"] == str(tmp_path / "vllm-0.1.0.json")
    assert "built from registry:5000/x@sha256:00" in plan_mod.format_plan(result)
    # the collection's own catalog comes first: an image's catalog of a shipped release is never read
    (tmp_path / "vllm-0.32.0.json").write_text(json.dumps({**built, "vllm_version": "0.32.0"}))
    assert run(tp(), image_catalog_dir=str(tmp_path))["vllm_catalog"]["source"] == "collection"


@pytest.mark.parametrize("version", ["0.31.0", "0.32.0", "0.33.0"])
def test_each_shipped_release_plans_against_its_own_catalog(version):
    result = run(replicas(image__vllm_version=version))
    assert result["violations"] == [], result["violations"]
    assert result["vllm_catalog"]["source"] == "collection" and result["vllm_catalog"]["version"] == version
    assert result["vllm_catalog"]["path"].endswith(f"vllm_catalog/vllm-{version}.json")


def test_an_option_the_release_does_not_have_is_refused_naming_the_release():
    # --grpc-port came with vLLM 0.32.0: 0.31.0's own parser has no such option
    result = run(replicas(image__vllm_version="0.31.0", **{"vllm_options__grpc-port": 50051}))
    violation = only(result, "vllm_flag_unknown")
    assert violation["value"] == "--grpc-port"
    assert "is not an option of vLLM 0.31.0" in violation["message"]
    assert "(vLLM 0.32.0 and 0.33.0 have it)" in violation["message"]
    assert run(replicas(image__vllm_version="0.32.0", **{"vllm_options__grpc-port": 50051}))["violations"] == []


# --- flags: exact options of the pinned release -----------------------------------------------------------


def test_pitfall_kv_cache_memory_abbreviation_refused():
    violation = only(run(tp(**{"vllm_options__kv-cache-memory": "3G"})), "vllm_flag_abbreviated")
    assert violation["value"] == "--kv-cache-memory"
    assert "--kv-cache-memory-bytes" in violation["message"] and "0.32.0" in violation["message"]


def test_pitfall_kv_cache_memory_bytes_accepted():
    result = run(tp(**{"vllm_options__kv-cache-memory-bytes": "3G"}))
    assert result["violations"] == []
    argv = result["nodes"]["spark-a"]["argv"]
    assert argv[argv.index("--kv-cache-memory-bytes") + 1] == "3G"
    assert result["nodes"]["spark-a"]["memory"]["kv_cache_gib"] == 3.0
    assert result["nodes"]["spark-a"]["memory"]["kv_cache_source"] == "--kv-cache-memory-bytes"


def test_pitfall_abbreviation_of_any_unique_prefix_refused():
    violation = only(run(tp(**{"vllm_options__enable-auto-tool": True})), "vllm_flag_abbreviated")
    assert "--enable-auto-tool-choice" in violation["message"]


@pytest.mark.parametrize(
    ("option", "hint"),
    [("kv-cache-dtpye", "--kv-cache-dtype"), ("swap-space", None), ("disable-log-requests", None)],
)
def test_pitfall_misspelled_or_removed_flag_refused(option, hint):
    violation = only(run(tp(**{"vllm_options__" + option: "4"})), "vllm_flag_unknown")
    assert violation["value"] == "--" + option
    if hint:
        assert hint in violation["message"]


def test_switch_given_a_value_refused():
    violation = only(run(tp(**{"vllm_options__trust-remote-code": "yes"})), "vllm_flag_takes_no_value")
    assert "true" in violation["message"]


def test_switch_false_becomes_no_form():
    argv = run(replicas(**{"vllm_options__enable-prefix-caching": False}))["nodes"]["spark-a"]["argv"]
    assert "--no-enable-prefix-caching" in argv


def test_option_with_choices_refuses_other_values():
    violation = only(run(tp(**{"vllm_options__kv-cache-dtype": "fp9"})), "vllm_flag_choice")
    assert "fp8" in violation["message"]


def test_options_written_by_the_plan_refused_in_vllm_options():
    violation = only(run(replicas(**{"vllm_options__gpu-memory-utilization": 0.9})), "vllm_option_owned_by_plan")
    assert "nodes.<host>.gpu_memory_utilization" in violation["message"]


def test_pitfall_limit_mm_per_prompt_invalid_json_refused():
    violation = only(run(tp(**{"vllm_options__limit-mm-per-prompt": "{image:0,video:0}"})), "vllm_flag_json_invalid")
    assert "valid JSON" in violation["message"]


def test_pitfall_limit_mm_per_prompt_json_string_accepted_and_normalised():
    result = run(tp(**{"vllm_options__limit-mm-per-prompt": '{"video": 0, "image": 0}'}))
    assert result["violations"] == []
    argv = result["nodes"]["spark-a"]["argv"]
    assert argv[argv.index("--limit-mm-per-prompt") + 1] == '{"image":0,"video":0}'


def test_pitfall_limit_mm_per_prompt_wrong_shape_refused():
    violation = only(run(replicas(**{"vllm_options__limit-mm-per-prompt": ["image", 0]})), "vllm_flag_json_shape")
    assert "JSON object" in violation["message"]


def test_pitfall_speculative_config_json_shape_refused():
    bad = {"method": "mtp", "num_speculative_tokens": "four"}
    violation = only(run(replicas(**{"vllm_options__speculative-config": bad})), "vllm_option_owned_by_plan")
    assert "speculative.num_tokens" in violation["message"]
    assert rules(run(replicas(speculative__num_tokens=0))) == ["speculative_config"]


def test_pitfall_speculative_config_written_as_json():
    argv = run(replicas())["nodes"]["spark-b"]["argv"]
    assert json.loads(argv[argv.index("--speculative-config") + 1]) == {"method": "mtp", "num_speculative_tokens": 4}


# --- text-only runs of a multimodal model (seed 004 pitfall 4) --------------------------------------------


def test_pitfall_text_only_limits_omitted_refused():
    violation = only(run(tp(**{"vllm_options__limit-mm-per-prompt": DELETE})), "text_only_mm_limits")
    assert '{"image":0,"video":0}' in violation["message"]


def test_pitfall_skip_mm_profiling_is_not_text_only():
    profile = tp(**{"vllm_options__limit-mm-per-prompt": DELETE, "vllm_options__skip-mm-profiling": True})
    violation = only(run(profile), "text_only_mm_limits")
    assert "--skip-mm-profiling only skips the engine's profiling pass" in violation["message"]


def test_pitfall_text_only_one_modality_left_above_zero_refused():
    violation = only(run(tp(**{"vllm_options__limit-mm-per-prompt": {"image": 0, "video": 1}})), "text_only_mm_limits")
    assert "video" in violation["message"]


def test_multimodal_run_that_is_not_text_only_needs_no_zero_limits():
    profile = tp(model__text_only=False, **{"vllm_options__limit-mm-per-prompt": {"image": 2, "video": 0}})
    assert run(profile)["violations"] == []


# --- tools ------------------------------------------------------------------------------------------------


def test_pitfall_enable_auto_tool_choice_without_tool_call_parser():
    violation = only(run(tp(**{"vllm_options__tool-call-parser": DELETE})), "tool_choice_without_parser")
    assert "--tool-call-parser" in violation["message"]


# --- the model path (seed 004 pitfall 5) and no shared filesystem (pitfall 6) -----------------------------


def test_pitfall_repo_id_is_not_a_model_path():
    node_map = nodes()
    node_map["spark-b"]["snapshot_path"] = "LibertAIDAI/GLM-5.3-Flash-NVFP4"
    violation = only(run(tp(), node_map), "model_not_local_path")
    assert violation["node"] == "spark-b" and "/snapshots/" + REVISION in violation["message"]


def test_pitfall_repo_id_as_model_option_refused():
    violation = only(run(tp(**{"vllm_options__model": "LibertAIDAI/GLM-5.3-Flash-NVFP4"})), "vllm_option_owned_by_plan")
    assert "snapshot path" in violation["message"]


def test_pitfall_served_model_name_always_set():
    argv = run(tp())["nodes"]["spark-a"]["argv"]
    assert argv[argv.index("--served-model-name") + 1] == "glm-5.3-flash"
    violation = only(run(tp(model__served_model_name=None)), "served_model_name_missing")
    assert "GLM-5.3-Flash-NVFP4" in violation["message"]


def test_pitfall_no_shared_filesystem_snapshot_path_per_node():
    node_map = nodes()
    node_map["spark-b"]["hf_cache_dir"] = "/data/hf"
    result = run(tp(), node_map)
    assert result["violations"] == []
    assert result["nodes"]["spark-b"]["snapshot_path"].startswith("/data/hf/hub/models--LibertAIDAI--")
    assert result["nodes"]["spark-a"]["snapshot_path"].startswith("/var/lib/gb10/hf-cache/hub/")


def test_pitfall_snapshot_outside_mounted_cache_refused():
    node_map = nodes()
    node_map["spark-a"]["snapshot_path"] = "/srv/models/glm"
    violation = only(run(tp(), node_map), "model_snapshot_outside_cache")
    assert violation["node"] == "spark-a" and "/root/.cache/huggingface" in violation["message"]


def test_given_snapshot_path_under_cache_maps_into_container():
    node_map = nodes()
    node_map["spark-a"]["snapshot_path"] = "/var/lib/gb10/hf-cache/hub/models--x--y/snapshots/" + REVISION
    argv = run(tp(), node_map)["nodes"]["spark-a"]["argv"]
    assert argv[2] == "/root/.cache/huggingface/hub/models--x--y/snapshots/" + REVISION


def test_revision_must_be_a_commit():
    violation = only(run(tp(model__revision="main")), "model_revision_not_pinned")
    assert "40-hex" in violation["message"]


# --- tensor-parallel across nodes (seed 004 pitfall 4 and the NCCL hang) ----------------------------------


def test_pitfall_distributed_executor_backend_ray_required():
    # the Ray launcher (TP_PROFILE) runs --distributed-executor-backend ray: an mp backend in vllm_options would
    # start vLLM's own executor beside the Ray cluster, which fails on a one-GPU node
    violation = only(run(tp(**{"vllm_options__distributed-executor-backend": "mp"})), "tp_executor_backend")
    assert violation["value"] == "mp" and "launcher is ray" in violation["message"]
    assert "World size (2)" in violation["message"]
    assert "Remove distributed-executor-backend from vllm_options" in violation["message"]


def test_pitfall_distributed_executor_backend_ray_set_explicitly_when_omitted():
    result = run(tp(**{"vllm_options__distributed-executor-backend": DELETE}))
    assert result["violations"] == []
    argv = result["nodes"]["spark-a"]["argv"]
    assert argv[argv.index("--distributed-executor-backend") + 1] == "ray"
    assert argv[argv.index("--tensor-parallel-size") + 1] == "2"


def test_pitfall_vllm_host_ip_must_equal_ray_node_ip():
    result = run(tp(env={"VLLM_HOST_IP": "192.168.200.11"}))
    violation = only(result, "tp_vllm_host_ip")
    assert violation["node"] == "spark-b" and "192.168.200.12" in violation["message"]


def test_tp_node_addresses_unique():
    node_map = nodes()
    node_map["spark-b"] = node("192.168.200.11", 112000, 3)
    violation = only(run(tp(), node_map), "tp_node_ip")
    assert "spark-a and spark-b" in violation["message"]


def test_tp_node_address_outside_fabric_subnet():
    node_map = nodes()
    node_map["spark-b"] = node("10.0.0.2", 112000, 3)
    violation = only(run(tp(), node_map), "tp_node_ip")
    assert violation["node"] == "spark-b" and "192.168.200.0/24" in violation["message"]


def test_pitfall_nccl_socket_ifname_must_exist_on_node():
    node_map = nodes()
    node_map["spark-b"]["fabric_interface"] = "eth9"
    result = run(tp(), node_map)
    assert rules(result) == ["tp_socket_ifname", "tp_socket_ifname"]
    assert {"NCCL_SOCKET_IFNAME=eth9 on spark-b", "GLOO_SOCKET_IFNAME=eth9 on spark-b"} == {
        v["message"].split(" names")[0] for v in result["violations"]
    }


def test_pitfall_socket_ifname_interface_must_hold_the_fabric_address():
    result = run(tp(env={"NCCL_SOCKET_IFNAME": "enP7s7"}))
    assert rules(result) == ["tp_socket_ifname", "tp_socket_ifname"]
    assert all("enP7s7 holds 192.168.1." in v["message"] for v in result["violations"])


def test_pitfall_ray_memory_monitor_disabled():
    assert run(tp())["nodes"]["spark-b"]["env"]["RAY_memory_monitor_refresh_ms"] == "0"
    result = run(tp(env={"RAY_memory_monitor_refresh_ms": "250"}))
    assert rules(result) == ["tp_ray_memory_monitor", "tp_ray_memory_monitor"]


def test_tp_group_needs_workers():
    assert "tp_group" in rules(run(tp(), ray_workers=[]))


# --- memory (seed 004 pitfall 2, the asymmetry, speculative decoding; seed 002 shares) --------------------


def test_pitfall_memory_failures_caught_before_start_headroom_below_margin():
    profile = replicas(nodes={"spark-a": {"gpu_memory_utilization": 0.90}, "spark-b": {"gpu_memory_utilization": 0.74}})
    violation = only(run(profile), "memory_headroom")
    assert violation["node"] == "spark-a"
    assert "MemAvailable 114.75 GiB" in violation["message"] and "margin 5.00 GiB" in violation["message"]
    # the replica's 1 GiB /dev/shm (the plan's default memory.shm_size) counts: 0.88, not 0.89
    assert "the engine's /dev/shm 1.00 GiB" in violation["message"]
    assert "nodes.spark-a.gpu_memory_utilization to 0.88 or less" in violation["message"]


def test_pitfall_tighter_node_is_the_budget_not_the_average():
    # spark-b at 0.85: 109.38 - 3 - 103.43 = 2.94 < 5 on its own figures; the pair's average (6.62) would pass.
    result = run(tp(defaults__gpu_memory_utilization=0.85))
    violation = only(result, "memory_headroom")
    assert violation["node"] == "spark-b"
    assert violation["value"] == pytest.approx(109.375 - 3 - 0.85 * 124608 / 1024, abs=0.01)
    assert "group's value (defaults.gpu_memory_utilization) to 0.83 or less" in violation["message"]


def test_pitfall_node_running_other_work_needs_lower_share():
    # Seed 002: at 0.78 only ~5 GiB was left for the database and builds; 0.74 fixed it.
    node_map = nodes()
    node_map["spark-b"] = node("192.168.200.12", 104000, 6)
    profile = replicas(nodes={"spark-a": {"gpu_memory_utilization": 0.78}, "spark-b": {"gpu_memory_utilization": 0.78}})
    violation = only(run(profile, node_map), "memory_headroom")
    assert violation["node"] == "spark-b" and "other work 6.00 GiB" in violation["message"]
    # 0.73, not 0.74: the replica's 1 GiB /dev/shm is carved from the same memory (issue 39 item 2)
    assert "0.73 or less" in violation["message"]
    # the seed's 0.74 holds with a 256m /dev/shm (with the default 1g it leaves spark-b 4.51 GiB, below the margin)
    assert run(replicas(memory__shm_size="256m"), node_map)["violations"] == []


def test_per_node_share_and_concurrency_in_argv():
    result = run(replicas())
    for host, share in (("spark-a", "0.78"), ("spark-b", "0.74")):
        argv = result["nodes"][host]["argv"]
        assert argv[argv.index("--gpu-memory-utilization") + 1] == share
        assert argv[argv.index("--max-num-seqs") + 1] == "12"


def test_pitfall_speculative_drafter_comes_out_of_kv_budget():
    on = run(replicas())["nodes"]["spark-a"]["memory"]
    off = run(replicas(speculative=None))["nodes"]["spark-a"]["memory"]
    assert on["drafter_gib"] == 2 and off["drafter_gib"] == 0
    assert off["kv_cache_gib"] - on["kv_cache_gib"] == pytest.approx(2, abs=0.01)
    assert on["kv_tokens"] < off["kv_tokens"]


def test_pitfall_speculative_drafter_can_leave_no_kv_room():
    # 0.83 x 121.69 - 90.65 - 3 = 7.35 GiB of KV room on each rank: an 8 GiB drafter leaves none on either.
    result = run(tp(speculative={"method": "mtp", "num_tokens": 4, "drafter_gib": 8}))
    assert rules(result) == ["memory_kv_budget", "memory_kv_budget"]
    assert [v["node"] for v in result["violations"]] == ["spark-a", "spark-b"]
    assert "drafter's 8.00 GiB comes out of the KV budget" in result["violations"][1]["message"]


def test_kv_cache_too_small_for_one_full_context_request():
    violation = only(run(replicas(context_length=1048576, model__max_position_embeddings=1048576)), "memory_kv_context")
    assert violation["node"] == "spark-b" and "fewer than one request" in violation["message"]


def test_explicit_kv_cache_bytes_must_fit_the_budget():
    violation = only(run(replicas(**{"vllm_options__kv-cache-memory-bytes": "12G"})), "memory_kv_budget")
    assert violation["node"] == "spark-b" and "--kv-cache-memory-bytes asks for 12.00 GiB" in violation["message"]


def test_memory_table_arithmetic():
    table = run(replicas())["nodes"]["spark-b"]["memory"]
    total = 124608 / 1024
    assert table["budget_gib"] == pytest.approx(0.74 * total, abs=0.01)
    assert table["kv_cache_gib"] == pytest.approx(0.74 * total - 71 - 2 - 5.5, abs=0.01)
    # the replica's private /dev/shm (memory.shm_size, 1g by default) counts against the host's headroom
    assert table["shm_gib"] == 1.0
    assert table["headroom_gib"] == pytest.approx(112000 / 1024 - 3 - 0.74 * total - 1, abs=0.01)
    # what a start (and a watchdog's restart) is admitted with: budget + /dev/shm + other work + margin
    assert table["start_need_gib"] == pytest.approx(0.74 * total + 1 + 3 + 5, abs=0.01)
    assert table["kv_tokens"] == int((0.74 * total - 78.5) * 2**30 // 16340)
    assert table["requests_at_full_context"] == pytest.approx(table["kv_tokens"] / 262144, abs=0.01)


def test_vllm_human_readable_sizes():
    assert memory_mod.parse_bytes("6G") == 6 * 2**30
    assert memory_mod.parse_bytes("6g") == 6 * 10**9
    assert memory_mod.parse_bytes("25.6k") == 25600
    with pytest.raises(ValueError):
        memory_mod.parse_bytes("1.5G")


def test_gqa_kv_heads_split_over_tensor_parallel_and_mla_replicated():
    gqa = {"kind": "gqa", "num_layers": 4, "num_kv_heads": 2, "head_dim": 64}
    assert memory_mod.kv_bytes_per_token(gqa, 2, 1) == 2 * 4 * 2 * 64 * 2
    assert memory_mod.kv_bytes_per_token(gqa, 2, 2) == 2 * 4 * 1 * 64 * 2
    mla = {"kind": "mla", "num_layers": 10, "kv_lora_rank": 512, "qk_rope_head_dim": 64}
    assert memory_mod.kv_bytes_per_token(mla, 1, 2) == 10 * 576


def test_missing_node_facts_named():
    node_map = nodes()
    del node_map["spark-b"]["facts"]["mem_available_mib"]
    violation = only(run(tp(), node_map), "node_facts_missing")
    assert "plan_gather_facts=true" in violation["message"]


# --- MAX_JOBS (seed 004 pitfall 7) ------------------------------------------------------------------------


def test_pitfall_max_jobs_missing_refused():
    violation = only(run(tp(max_jobs=None)), "max_jobs_missing")
    assert "MAX_JOBS" in violation["message"]


def test_pitfall_max_jobs_forwarded_to_every_container():
    for profile in (tp(), replicas()):
        assert {entry["env"]["MAX_JOBS"] for entry in run(profile)["nodes"].values()} == {"2"}


def test_pitfall_max_jobs_overridden_by_env_refused():
    result = run(tp(env={"MAX_JOBS": ""}))
    assert rules(result) == ["max_jobs_not_forwarded", "max_jobs_not_forwarded"]


def test_max_jobs_above_cores_refused():
    assert rules(run(replicas(max_jobs=64))) == ["max_jobs_above_cores", "max_jobs_above_cores"]


# --- all at once ------------------------------------------------------------------------------------------


def test_all_violations_collected_not_the_first_one():
    profile = tp(
        image__ref="ghcr.io/x/y:latest",
        max_jobs=None,
        **{"vllm_options__kv-cache-memory": "3G", "vllm_options__limit-mm-per-prompt": DELETE},
    )
    found = rules(run(profile))
    for rule in ("image_not_digest", "max_jobs_missing", "vllm_flag_abbreviated", "text_only_mm_limits"):
        assert rule in found
    for violation in run(profile)["violations"]:
        assert set(violation) == {"node", "rule", "value", "message"}


def test_plan_does_not_mutate_its_inputs():
    profile, node_map = tp(), nodes()
    before = json.dumps([profile, node_map], sort_keys=True)
    run(profile, node_map)
    assert json.dumps([profile, node_map], sort_keys=True) == before


def test_format_plan_is_readable_per_node():
    text = plan_mod.format_plan(run(replicas(**{"vllm_options__kv-cache-memory": "3G"})))
    assert "== spark-a (replica)" in text and "== spark-b (replica)" in text
    assert "host headroom" in text and "VIOLATIONS (1)" in text


def test_non_numeric_figures_are_violations_not_exceptions():
    node_map = nodes()
    node_map["spark-b"]["other_work_reserve_gib"] = "lots"
    result = run(replicas(memory={"margin_gib": "five", "activation_reserve_gib": 5.5}), node_map)
    assert sorted(v["value"] for v in result["violations"] if v["rule"] == "not_a_number") == ["five", "lots"]


def test_port_and_concurrency_are_plan_fields_for_the_proxy_and_units():
    # roles/proxy sets per-server maxconn from these; they must equal what the argv says.
    for result in (run(replicas()), run(tp())):
        for entry in result["nodes"].values():
            if entry["argv"]:
                argv = entry["argv"]
                assert entry["port"] == int(argv[argv.index("--port") + 1])
                assert entry["max_num_seqs"] == int(argv[argv.index("--max-num-seqs") + 1])
            else:
                assert entry["port"] is None and entry["max_num_seqs"] is None


def test_pitfall_vllm_0_33_negates_a_switch_as_its_complement_not_no():
    # measured from the parsers: 0.32.0 has --no-enable-prefix-caching, 0.33.0 only --disable-prefix-caching (dest
    # enable_prefix_caching): `false` (written --no-<name>) is refused, naming the release's own negation
    assert run(replicas(**{"vllm_options__enable-prefix-caching": False}))["violations"] == []
    result = run(replicas(image__vllm_version="0.33.0", **{"vllm_options__enable-prefix-caching": False}))
    violation = only(result, "vllm_flag_unknown")
    assert violation["value"] == "--no-enable-prefix-caching"
    assert "is not an option of vLLM 0.33.0" in violation["message"]
    assert "(vLLM 0.31.0 and 0.32.0 have it)" in violation["message"]
    assert (
        "write vllm_options.disable-prefix-caching: true instead of enable-prefix-caching: false"
        in violation["message"]
    )
    result = run(replicas(image__vllm_version="0.33.0", **{"vllm_options__disable-prefix-caching": True}))
    assert result["violations"] == [] and "--disable-prefix-caching" in result["nodes"]["spark-a"]["argv"]
