"""gb10.serving.flashinfer_jit_plan over a real folder: the cache check the role skips its build on."""

import hashlib
import json

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit import stamps
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.build_identity import sha256_text
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.cache_layout import STAMP_NAME, cache_paths
from ansible_collections.gb10.serving.plugins.modules import flashinfer_jit_plan

DIGEST = "registry:5000/vllm@sha256:" + "c" * 64


def params(cache_dir, **over):
    base = {
        "cache_dir": str(cache_dir),
        "workspace_base": "/root/.cache/flashinfer-workspace",
        "image_digest": DIGEST,
        "flashinfer_version": "0.6.18",
        "compute_capability": "12.1",
        "env": {"MAX_JOBS": "2"},
        "per_job_peak_mib": 9606,
        "reserve_mib": 8192,
        "cores": 20,
        "mem_available_mib": 112640,
    }
    return base | over


def build(cache_dir, digest=DIGEST):
    paths = cache_paths(cache_dir, "0.6.18", "12.1")
    library = cache_dir / paths["library"][len(str(cache_dir)) + 1 :]
    library.parent.mkdir(parents=True)
    library.write_bytes(b"\x7fELF module")
    sha = hashlib.sha256(library.read_bytes()).hexdigest()
    (library.parent / "build.ninja").write_text("cxx = c++\n")
    stamp = stamps.stamp(digest, "0.6.18", "12.1", sha, 10, 1.0, ninja_sha256=sha256_text("cxx = c++\n"))
    (library.parent / STAMP_NAME).write_text(json.dumps(stamp))
    return library


def test_empty_cache_means_build(tmp_path):
    result = flashinfer_jit_plan.run(params(tmp_path))
    assert not result["present"]
    assert result["max_jobs"] == 10
    assert result["module"] == "fused_moe_120"
    assert result["container_paths"]["library"].startswith("/root/.cache/flashinfer-workspace/.cache/flashinfer/")
    assert result["problems"] == []


def test_stamped_module_means_skip(tmp_path):
    build(tmp_path)
    result = flashinfer_jit_plan.run(params(tmp_path))
    assert result["present"], result["reason"]
    assert result["changed"] is False


def test_kind_says_how_the_present_module_came(tmp_path):
    """The role reports a prebuilt module as prebuilt, not as built (issue 38 item 4, seen in the simulation)."""
    assert flashinfer_jit_plan.run(params(tmp_path))["kind"] == ""
    build(tmp_path)
    assert flashinfer_jit_plan.run(params(tmp_path))["kind"] == "built"
    stamp_path = tmp_path / cache_paths(tmp_path, "0.6.18", "12.1")["stamp"][len(str(tmp_path)) + 1 :]
    stamp = json.loads(stamp_path.read_text())
    aot = [{"provider": "sm121a", "path": "/opt/venv/.../fused_moe_120.so", "sha256": "e" * 64}]
    stamp_path.write_text(json.dumps(stamp | {"kind": "prebuilt", "aot": aot}))
    (stamp_path.parent / "fused_moe_120.so").unlink()
    result = flashinfer_jit_plan.run(params(tmp_path))
    assert (result["present"], result["kind"]) == (True, "prebuilt"), result["reason"]


def test_module_of_another_image_means_build(tmp_path):
    build(tmp_path, digest="registry:5000/vllm@sha256:" + "d" * 64)
    result = flashinfer_jit_plan.run(params(tmp_path))
    assert not result["present"]
    assert result["reason"].startswith("stamp image_digest")


def test_stated_per_job_figure_wins(tmp_path):
    result = flashinfer_jit_plan.run(params(tmp_path))
    assert (result["per_job_peak_mib"], result["per_job_peak_source"]) == (
        9606,
        "stated (flashinfer_jit_per_job_peak_mib)",
    )


def test_zero_per_job_figure_reads_the_node_arch(tmp_path, monkeypatch):
    monkeypatch.setattr(flashinfer_jit_plan, "_machine", lambda: "aarch64")
    result = flashinfer_jit_plan.run(params(tmp_path, per_job_peak_mib=0))
    assert result["per_job_peak_mib"] == 10605 and "aarch64" in result["per_job_peak_source"]
    assert result["max_jobs"] == 9
    monkeypatch.setattr(flashinfer_jit_plan, "_machine", lambda: "x86_64")
    assert flashinfer_jit_plan.run(params(tmp_path, per_job_peak_mib=0))["per_job_peak_mib"] == 10605


def test_debug_environment_and_no_room_are_problems(tmp_path):
    result = flashinfer_jit_plan.run(
        params(tmp_path, env={"FLASHINFER_JIT_VERBOSE": "1", "MAX_JOBS": "2"}, mem_available_mib=10240)
    )
    assert len(result["problems"]) == 2
    assert result["max_jobs"] == 0


def test_pitfall_build_ninja_rewritten_since_the_prebuild_means_build(tmp_path):
    """Issue 17: a process with another CC rewrote build.ninja; the stamped .so alone no longer proves the cache."""
    library = build(tmp_path)
    (library.parent / "build.ninja").write_text("cxx = /usr/bin/g++\n")
    result = flashinfer_jit_plan.run(params(tmp_path))
    assert not result["present"]
    assert result["reason"].startswith("build.ninja changed since the prebuild")


def test_last_build_figures_come_from_the_stamp(tmp_path):
    build(tmp_path)
    result = flashinfer_jit_plan.run(params(tmp_path))
    assert result["last_build"]["build_seconds"] == 1.0
    assert result["last_build"]["max_jobs"] == 10
