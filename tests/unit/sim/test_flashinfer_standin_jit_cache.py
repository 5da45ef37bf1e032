"""The FlashInfer stand-in's prebuilt modules (issue 38 item 4): JIT-cache wheels laid out as flashinfer 0.7's, taken
only for an architecture they cover, loaded by the serving call without ninja."""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).parents[3]
STANDIN = REPO / "sim" / "flashinfer_standin"
MAKE = STANDIN / "jit_cache" / "make_wheels.py"
ENTRY = REPO / "roles" / "flashinfer_jit" / "files" / "flashinfer_prebuild.py"
SMALL = {"GB10_STANDIN_MOE_UNITS": "2", "GB10_STANDIN_UNIT_WORK": "10", "CC": "gcc", "MAX_JOBS": "2"}
BUILD = ".cache/flashinfer/0.6.18/121a/cached_ops/fused_moe_120"

pytestmark = pytest.mark.skipif(
    not (shutil.which("ninja") and shutil.which("gcc")), reason="needs ninja and gcc (apt-get install ninja-build gcc)"
)


def wheels(dest, *tags):
    done = subprocess.run(
        [sys.executable, str(MAKE), str(dest), *tags],
        env={**os.environ, **SMALL},
        capture_output=True,
        text=True,
        check=True,
    )
    return [Path(line) for line in done.stdout.split()]


def installed(tmp_path, *tags):
    """The wheels unpacked as pip lays a wheel out in site-packages (purelib and platlib are the same folder here)."""
    site = tmp_path / "site"
    (tmp_path / "wheels").mkdir()
    for wheel in wheels(tmp_path / "wheels", *tags):
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(site)
    return site


def run(args, site, workspace, **extra):
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(workspace),
        "PYTHONPATH": f"{STANDIN}:{site}",
        "FLASHINFER_WORKSPACE_BASE": str(workspace),
        **SMALL,
        **extra,
    }
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=120, check=False)


def prebuild(site, workspace):
    done = run([str(ENTRY), "--compute-capability", "12.1"], site, workspace, GB10_IMAGE_DIGEST="r@sha256:" + "1" * 64)
    lines = [line for line in done.stdout.splitlines() if line.startswith("GB10_PREBUILD_RESULT ")]
    assert done.returncode == 0 and lines, done.stdout + done.stderr
    return json.loads(lines[-1].split(" ", 1)[1])


SERVING_CALL = """
import json
from flashinfer.fused_moe.core import get_cutlass_fused_moe_module
get_cutlass_fused_moe_module("121")
maps = sorted({line.split()[-1] for line in open("/proc/self/maps") if line.rstrip().endswith(".so")})
print(json.dumps(maps))
"""


def test_wheels_have_the_0_7_layout(tmp_path):
    shim, provider = sorted(wheels(tmp_path, "sm121a"), key=lambda path: "sm121a" not in path.name)[::-1]
    assert shim.name == "flashinfer_jit_cache-0.6.18+cu130-py3-none-any.whl"
    assert provider.name.startswith("flashinfer_jit_cache_sm121a-0.6.18+cu130-cp39-abi3-manylinux_2_28_")
    with zipfile.ZipFile(provider) as archive:
        names = set(archive.namelist())
        info = "flashinfer_jit_cache_sm121a-0.6.18+cu130.dist-info"
        entry = archive.read(f"{info}/entry_points.txt").decode()
        manifest = json.loads(archive.read("flashinfer_jit_cache/providers/sm121a/manifest.json"))
    assert {
        "flashinfer_jit_cache/providers/sm121a/__init__.py",
        "flashinfer_jit_cache/providers/sm121a/_build_meta.py",
        "flashinfer_jit_cache/providers/sm121a/jit_cache/fused_moe_120/fused_moe_120.so",
    } <= names
    assert "flashinfer_jit_cache/__init__.py" not in names, "the shim owns the package's __init__"
    assert entry == "[flashinfer.jit_cache.providers]\nsm121a = flashinfer_jit_cache.providers.sm121a:get_provider\n"
    assert manifest == {
        "schema_version": 1,
        "provider_id": "sm121a",
        "distribution": "flashinfer-jit-cache-sm121a",
        "version": "0.6.18+cu130",
        "cuda_architectures": ["sm121a"],
        "modules": ["fused_moe_120"],
    }
    with zipfile.ZipFile(shim) as archive:
        metadata = archive.read("flashinfer_jit_cache-0.6.18+cu130.dist-info/METADATA").decode()
    assert "Requires-Dist: flashinfer-jit-cache-sm121a==0.6.18+cu130" in metadata


def test_prebuilt_for_the_target_builds_nothing_and_the_serving_call_loads_it(tmp_path):
    site = installed(tmp_path, "sm121a")
    workspace = tmp_path / "ws"
    result = prebuild(site, workspace)
    assert result["status"] == "prebuilt", result
    provider_so = site / "flashinfer_jit_cache/providers/sm121a/jit_cache/fused_moe_120/fused_moe_120.so"
    assert [item["path"] for item in result["stamp"]["aot"]] == [str(provider_so)]
    done = run(["-c", SERVING_CALL], site, workspace, FLASHINFER_CUDA_ARCH_LIST="12.1")
    assert done.returncode == 0, done.stderr
    assert str(provider_so) in json.loads(done.stdout), done.stdout
    build_dir = workspace / BUILD
    assert sorted(path.name for path in build_dir.iterdir()) == ["gb10-prebuild.json", "gb10-prebuild.log"]


@pytest.mark.parametrize("tag", ["sm120a", "sm90a"])
def test_pitfall_prebuilt_module_for_another_architecture_is_not_taken(tmp_path, tag):
    """flashinfer#5238: a prebuilt module without an SM12x image took precedence over the JIT. An sm120a provider's
    fused_moe_120 does not run on sm121a (an ``a`` target needs its own compute capability): built as without one."""
    result = prebuild(installed(tmp_path, tag), tmp_path / "ws")
    assert result["status"] == "built", result
    assert "aot" not in result["stamp"]
    assert (tmp_path / "ws" / BUILD / ".ninja_log").exists()


SCORES = """
import json
from flashinfer.jit.env import compatibility_score
pairs = [("sm121a", "sm121a"), ("sm120f", "sm121a"), ("sm120", "sm121a"), ("sm120a", "sm121a"), ("sm122f", "sm121a"),
         ("sm90a", "sm121a")]
print(json.dumps([compatibility_score(binary, device) for binary, device in pairs]))
"""


def test_family_provider_covers_the_target(tmp_path):
    # 0.7.2.post1 _cuda_architecture.cuda_binary_target_compatibility_score, the rule the stand-in follows.
    done = run(["-c", SCORES], tmp_path, tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [[4, 1], [2, 0], [1, 0], None, None, None]


def test_provider_of_another_flashinfer_version_is_ignored(tmp_path):
    site = installed(tmp_path, "sm121a")
    for meta in site.rglob("_build_meta.py"):
        meta.write_text('__version__ = "0.7.2.post1+cu130"\n')
    assert prebuild(site, tmp_path / "ws")["status"] == "built"
