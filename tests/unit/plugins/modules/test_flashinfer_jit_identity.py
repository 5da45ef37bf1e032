# Copyright: gb10.serving maintainers
# Apache-2.0
"""flashinfer_jit_identity with docker answered by the test: each `docker run` runs the role's entry point with the
FlashInfer stand-in locally, in exactly the environment its --env-file files give (issue 17 item 1)."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from module_harness import run_main

REPO = Path(__file__).resolve().parents[4]
STANDIN = REPO / "sim" / "flashinfer_standin"
ENTRY = REPO / "roles" / "flashinfer_jit" / "files" / "flashinfer_prebuild.py"
IMAGE = "registry:5000/gb10-sim/vllm-standin@sha256:" + "5" * 64
SMALL = {"GB10_STANDIN_MOE_UNITS": "4", "GB10_STANDIN_UNIT_WORK": "20", "MAX_JOBS": "2"}
identity = importlib.import_module("ansible_collections.gb10.serving.plugins.modules.flashinfer_jit_identity")

pytestmark = pytest.mark.skipif(not (shutil.which("ninja") and shutil.which("gcc")), reason="needs ninja and gcc")


def prebuild(cache, **extra):
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(STANDIN), "FLASHINFER_WORKSPACE_BASE": str(cache)}
    env |= {"GB10_IMAGE_DIGEST": IMAGE, "CC": "gcc", **SMALL, **extra}
    done = subprocess.run(
        [sys.executable, str(ENTRY), "--compute-capability", "12.1"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def fake_docker(cache, seen):
    """`docker run ... --env-file F ... --entrypoint python3 IMAGE entry --ninja-only --compute-capability X`."""

    def run_command(self, cmd, **_kwargs):
        seen.append(cmd)
        argv = cmd[2:]  # timeout N
        env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(STANDIN)}
        for i, word in enumerate(argv):
            if word == "--env-file":
                for line in Path(argv[i + 1]).read_text().splitlines():
                    if line and not line.startswith("#"):
                        key, value = line.split("=", 1)
                        env[key] = value
        rest = argv[argv.index(IMAGE) + 1 :]
        done = subprocess.run(
            [sys.executable, str(ENTRY), *rest[1:]], env=env, capture_output=True, text=True, check=False
        )
        return done.returncode, done.stdout, done.stderr

    return run_command


def args(tmp_path, engine_env):
    scratch = tmp_path / "scratch"
    env_file = scratch / "engine.env"
    return {
        "node": "spark-1",
        "cache_dir": str(tmp_path / "cache"),
        "image": IMAGE,
        "argv": [
            "/usr/bin/docker",
            "run",
            "--rm",
            "--env-file",
            str(env_file),
            "--entrypoint",
            "python3",
            IMAGE,
            "/opt/gb10/flashinfer_prebuild.py",
            "--ninja-only",
        ],
        "env_files": [{"path": str(env_file), "content": "# Ansible managed\n" + engine_env}],
        "scratch_dir": str(scratch),
    }


def engine_env(cache, **extra):
    return "".join(f"{k}={v}\n" for k, v in {"FLASHINFER_WORKSPACE_BASE": str(cache), **SMALL, **extra}.items())


def test_the_serving_environment_of_the_prebuild_is_the_cache(tmp_path):
    cache = tmp_path / "cache"
    prebuild(cache)
    seen = []
    result = run_main(identity.main, args(tmp_path, engine_env(cache, CC="gcc")), fake_docker(cache, seen))
    assert not result["failed"], result
    assert result["checked"] == [str(cache / ".cache/flashinfer/0.6.18/121a/cached_ops/fused_moe_120")]
    assert seen[0][-2:] == ["--compute-capability", "12.1"]
    # The env files (the secrets file is one of them) are gone; the serving unit's build.ninja is kept for the operator.
    assert sorted(p.name for p in (tmp_path / "scratch").iterdir()) == ["fused_moe_120.serving.ninja"]


def test_pitfall_another_cc_in_the_serving_unit_is_refused_naming_the_lines(tmp_path):
    cache = tmp_path / "cache"
    prebuild(cache)
    other = shutil.which("gcc")
    result = run_main(identity.main, args(tmp_path, engine_env(cache, CC=other)), fake_docker(cache, []))
    assert result["failed"]
    assert result["msg"].startswith("spark-1: the serving unit would rebuild fused_moe_120")
    assert f"+nvcc = {other}" in result["diff"] and "-nvcc = gcc" in result["diff"]
    assert "No serving unit was started." in result["msg"]
    stamp = json.loads(
        (cache / ".cache/flashinfer/0.6.18/121a/cached_ops/fused_moe_120/gb10-prebuild.json").read_text()
    )
    assert result["sha256"] != stamp["ninja_sha256"]


def test_no_stamped_module_for_the_image_runs_no_container(tmp_path):
    seen = []
    result = run_main(identity.main, args(tmp_path, ""), fake_docker(tmp_path / "cache", seen))
    assert not result["failed"] and result["checked"] == [] and seen == []


def with_images(local, docker):
    """``docker`` answering `docker image inspect` for the images in ``local`` (check mode asks before it runs)."""

    def run_command(self, cmd, **kwargs):
        if cmd[1:3] == ["image", "inspect"]:
            return (0, "[]", "") if cmd[3] in local else (1, "", f"No such image: {cmd[3]}")
        return docker(self, cmd, **kwargs)

    return run_command


def test_check_mode_still_refuses_and_never_pulls(tmp_path):
    # Issue 37 item 3: the refusal guards the units a real run writes, so check mode makes it too.
    cache = tmp_path / "cache"
    prebuild(cache)
    seen = []
    bad = {**args(tmp_path, engine_env(cache, CC=shutil.which("gcc"))), "_ansible_check_mode": True}
    result = run_main(identity.main, bad, with_images({IMAGE}, fake_docker(cache, seen)))
    assert result["failed"] and result["msg"].startswith("spark-1: the serving unit would rebuild fused_moe_120")
    assert seen[0][2:7] == ["/usr/bin/docker", "run", "--pull", "never", "--rm"], seen[0]
    good = {**args(tmp_path, engine_env(cache, CC="gcc")), "_ansible_check_mode": True}
    assert not run_main(identity.main, good, with_images({IMAGE}, fake_docker(cache, [])))["failed"]


def test_check_mode_says_it_cannot_check_an_image_the_node_does_not_hold(tmp_path):
    cache = tmp_path / "cache"
    prebuild(cache)
    seen = []
    check = {**args(tmp_path, engine_env(cache, CC="gcc")), "_ansible_check_mode": True}
    result = run_main(identity.main, check, with_images(set(), fake_docker(cache, seen)))
    assert not result["failed"] and result["same"] is None and seen == [], result
    assert any("checked by the real run" in warning for warning in result["warnings_emitted"]), result


def test_check_mode_runs_no_container_whose_mount_source_is_not_on_the_node_yet(tmp_path):
    # docker would make the missing source as an empty folder: a change (a real run installs the file first).
    cache = tmp_path / "cache"
    prebuild(cache)
    seen = []
    check = {**args(tmp_path, engine_env(cache, CC="gcc")), "_ansible_check_mode": True}
    missing = str(tmp_path / "libexec" / "gb10-secrets-exec")
    check["argv"] = [*check["argv"][:3], "--volume", f"{missing}:/gb10/exec:ro", *check["argv"][3:]]
    result = run_main(identity.main, check, with_images({IMAGE}, fake_docker(cache, seen)))
    assert not result["failed"] and result["same"] is None and seen == [], result
    assert any(missing in warning for warning in result["warnings_emitted"]), result
    assert not (tmp_path / "libexec").exists()
