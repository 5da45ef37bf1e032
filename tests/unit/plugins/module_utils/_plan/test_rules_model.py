# Copyright: gb10.serving maintainers
# Apache-2.0
"""One test per rule of rules_model.py, named after the rule (test_registry.py checks that each has one)."""

from __future__ import annotations

from _plan_fixtures import DELETE, node, only, plan_mod, replicas, rules, run, tp


def test_image_not_digest():
    violation = only(run(tp(image__ref="ghcr.io/example-org/spark-vllm:0.32.0")), "image_not_digest")
    assert violation["value"] == "ghcr.io/example-org/spark-vllm:0.32.0" and "@sha256:" in violation["message"]


def test_vllm_catalog_missing():
    # a version that is no release (a tag, a local part, nothing): no catalog could ever be found or built for it
    for version in ("latest", "0.32.0+cpu", ""):
        violation = only(run(tp(image__vllm_version=version)), "vllm_catalog_missing")
        assert violation["value"] == (version or None)
        assert (
            violation["message"].startswith("image.vllm_version: ") and "is not a vLLM release" in violation["message"]
        )


def test_model_repo_id():
    violation = only(run(replicas(model__repo_id="just-a-name")), "model_repo_id")
    assert violation["value"] == "just-a-name" and "<org>/<name>" in violation["message"]


def test_model_revision_not_pinned():
    violation = only(run(replicas(model__revision="v1.0")), "model_revision_not_pinned")
    assert violation["value"] == "v1.0" and "40-hex commit id" in violation["message"]


def test_served_model_name_missing():
    violation = only(run(replicas(model__served_model_name="")), "served_model_name_missing")
    assert "'GLM-5.3-Flash-NVFP4-QAD'" in violation["message"]


def test_topology_unknown():
    violation = only(run(replicas(topology="pipeline")), "topology_unknown")
    assert violation["value"] == "pipeline" and "replicas, tensor_parallel" in violation["message"]


def test_tp_group():
    (violation,) = [v for v in run(tp(), ray_head="spark-z")["violations"] if v["rule"] == "tp_group"]
    assert violation["value"] == "spark-z" and "gb10_ray_head" in violation["message"]
    violation = only(run(tp(), ray_workers=["spark-b", "spark-q"]), "tp_group")
    assert violation["value"] == "spark-q" and "not in gb10_nodes: spark-q" in violation["message"]


def test_no_nodes():
    violation = only(run(replicas(nodes={}), {}), "no_nodes")
    assert "nothing to plan" in violation["message"]


def test_speculative_config():
    violation = only(run(replicas(speculative__method=None)), "speculative_config")
    assert "method=None num_tokens=4" in violation["message"]


def test_speculative_drafter_size():
    violation = only(run(replicas(speculative__drafter_gib=DELETE)), "speculative_drafter_size")
    assert "speculative.drafter_gib is not set" in violation["message"]


def test_context_length():
    violation = only(run(replicas(context_length="long")), "context_length")
    assert violation["value"] == "long" and "--max-model-len" in violation["message"]


def test_max_jobs_missing():
    violation = only(run(replicas(max_jobs=0)), "max_jobs_missing")
    assert violation["value"] == 0 and "max_jobs is 0" in violation["message"]


def test_not_a_number():
    node_map = {"spark-a": node("192.168.200.11", 117500, "a lot"), "spark-b": node("192.168.200.12", 112000, 3)}
    result = run(replicas(port="eighty"), node_map)
    assert rules(result) == ["not_a_number", "not_a_number"]
    assert [(v["node"], v["value"]) for v in result["violations"]] == [("all", "eighty"), ("spark-a", "a lot")]
    assert "memory_guard_other_work_reserve_gib of spark-a must be a number" in result["violations"][1]["message"]


def test_model_checkpoint_size():
    result = run(replicas(model__checkpoint_gib=DELETE))
    assert "model_checkpoint_size" in rules(result)
    violation = next(v for v in result["violations"] if v["rule"] == "model_checkpoint_size")
    assert "model.checkpoint_gib must state" in violation["message"]


def test_model_attention_shape():
    violation = only(run(replicas(model__attention={"kind": "gqa", "num_layers": 4})), "model_attention_shape")
    assert "model.attention is incomplete" in violation["message"]


def test_model_attention_heads():
    attention = {"kv_bytes_per_token": 16340, "num_heads": 0}
    violation = only(run(replicas(model__attention=attention)), "model_attention_heads")
    assert violation["value"] == 0 and "positive whole number" in violation["message"]


def test_kv_cache_memory_bytes():
    # "None" passes vLLM's parser (optional_type: no explicit cache) but is not a size the plan can budget
    violation = only(run(replicas(**{"vllm_options__kv-cache-memory-bytes": "None"})), "kv_cache_memory_bytes")
    assert violation["value"] == "None" and "such as 6G" in violation["message"]
    # what vLLM's parser refuses is reported once, by vllm_flag_type
    only(run(replicas(**{"vllm_options__kv-cache-memory-bytes": "lots"})), "vllm_flag_type")


def test_model_config_facts():
    violation = only(run(replicas(model__max_position_embeddings=DELETE)), "model_config_facts")
    assert violation["value"] is None and "config.json" in violation["message"]
    violation = only(run(replicas(model__mtp_layers="one")), "model_config_facts")
    assert violation["value"] == "one" and "num_nextn_predict_layers" in violation["message"]


def test_context_length_above_model():
    violation = only(run(replicas(model__max_position_embeddings=131072)), "context_length_above_model")
    assert violation["value"] == 262144
    assert "model.max_position_embeddings is 131072" in violation["message"]
    assert "Set context_length to at most 131072" in violation["message"]
    # vLLM's own override (vllm/envs.py: "1" or "true", any case): it starts, so the plan does not refuse it
    allowed = replicas(model__max_position_embeddings=131072, env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "True"})
    assert run(allowed)["violations"] == []


def test_speculative_method_model():
    violation = only(run(replicas(model__mtp_layers=0)), "speculative_method_model")
    assert violation["value"] == "mtp" and "Unsupported speculative method: 'mtp'" in violation["message"]
    assert "ngram" in violation["message"]
    violation = only(run(replicas(model__mtp_layers=DELETE)), "speculative_method_model")
    assert "state config.json's num_nextn_predict_layers as model.mtp_layers" in violation["message"]
    violation = only(run(replicas(model__mtp_layers=3)), "speculative_method_model")
    assert "must be divisible by n_predict=3" in violation["message"]
    # ngram needs no MTP layers; deprecated model-specific MTP names are still MTP
    ngram = replicas(model__mtp_layers=0, speculative__method="ngram", speculative__drafter_gib=0)
    assert run(ngram)["violations"] == []
    assert rules(run(replicas(model__mtp_layers=0, speculative__method="deepseek_mtp"))) == ["speculative_method_model"]


def test_pitfall_trailing_newline_in_an_image_ref_or_revision_is_refused():
    # Python's `$` matches before a final newline: "repo@sha256:<hex>\n" passed the digest rule and reached the unit.
    ref = "ghcr.io/example-org/spark-vllm@sha256:" + "ab" * 32
    assert plan_mod.DIGEST_REF_RE.match(ref) and not plan_mod.DIGEST_REF_RE.match(ref + "\n")
    assert "image_not_digest" in rules(run(tp(**{"image__ref": ref + "\n"})))
    revision = "3f9a1c7e5b2d8a4f6c0e1b3d5a7f9c2e4b6d8a0f\n"
    assert "model_revision_not_pinned" in rules(run(tp(**{"model__revision": revision})))
