# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/serving_image/files/toolchain_gaps.py against the real CUDA 13.0 pip wheels and flashinfer-python 0.6.18.

Issue 17, item 6: the earlier fix linked libnvrtc.so beside the SONAME in the wheel's folder, which is not on
FlashInfer's link line; an H200 build then failed with `/usr/bin/ld: cannot find -lnvrtc` (seed 004's layer 3).

The wheels come from PyPI once and are kept in sim/build/cuda-wheels (ignored by git, reused by later runs):
nvidia-cuda-nvrtc 13.0.88 (nvidia/cu13/include/nvrtc.h, nvidia/cu13/lib/libnvrtc.so.13 and no libnvrtc.so),
nvidia-cuda-runtime 13.0.96 (nvidia/cu13/include/cuda*.h, nvidia/cu13/lib/libcudart.so.13) and flashinfer-python
0.6.18, whose own jit/cpp_ext.py and jit/fused_moe.py the script reads its flags from. They are installed with
`pip install --target` into the site-packages of a fresh venv, whose python runs the script, as in the image.

No wheel gives a CUDA toolkit layout, so the test builds a CUDA_HOME of the shape of a real CUDA 13.0 toolkit
installed without nvrtc (the H200 host's): include and lib64 are links into targets/<arch>-linux/, include holds
the runtime wheel's headers (and no nvrtc.h), lib64 holds the runtime wheel's libcudart.so.13 with the toolkit's
devel link libcudart.so, lib64/stubs holds libcuda.so, version.json names CUDA 13.0. Where it departs from a real
/usr/local/cuda: no bin/ (no nvcc: the check uses FlashInfer's C++ link driver, c++, as its link rule does), no other
libraries or headers than those two wheels', and lib64/stubs/libcuda.so is a stub this test compiles with gcc (SONAME
libcuda.so.1, one symbol cuInit) because no wheel ships NVIDIA's stub. The unit is compiled and linked with the
host's c++ and then run: nvrtcVersion() needs no GPU.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "roles" / "serving_image" / "files" / "toolchain_gaps.py"
CACHE = REPO / "sim" / "build" / "cuda-wheels"
WHEELS = {"nvidia-cuda-nvrtc": "13.0.88", "nvidia-cuda-runtime": "13.0.96", "flashinfer-python": "0.6.18"}
TARGETS = {"x86_64": "x86_64-linux", "aarch64": "sbsa-linux"}

PROGRAM = """\
#include <cstdio>
#include <nvrtc.h>
int main() {
  int major = 0, minor = 0;
  if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return 1;
  std::printf("nvrtc %d.%d\\n", major, minor);
  return 0;
}
"""


def _cached(name, version):
    return list(CACHE.glob(f"{name.replace('-', '_')}-{version}-*.whl"))


@pytest.fixture(scope="module")
def site_dir(tmp_path_factory):
    """A fresh venv whose site-packages holds the three real wheels, installed by pip from the cache."""
    if not shutil.which("c++"):
        pytest.fail("no c++ on PATH: FlashInfer links with c++; `make host` (or apt-get install g++) installs it")
    missing = [f"{n}=={v}" for n, v in WHEELS.items() if not _cached(n, v)]
    if missing:
        CACHE.mkdir(parents=True, exist_ok=True)
        got = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", CACHE, *missing],
            capture_output=True,
            text=True,
            check=False,
        )
        assert got.returncode == 0, f"pip download {missing} into {CACHE} failed:\n{got.stdout}{got.stderr}"
    env_dir = tmp_path_factory.mktemp("venv")
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import site; print(site.getsitepackages()[0])"], capture_output=True, text=True, check=True
    ).stdout.strip()
    wheels = [str(p) for n, v in WHEELS.items() for p in _cached(n, v)]
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", site, *wheels],
        check=True,
    )
    lib = Path(site) / "nvidia" / "cu13" / "lib"
    # The premise of the issue: the real wheel has the SONAME only.
    assert (lib / "libnvrtc.so.13").is_file() and not (lib / "libnvrtc.so").exists()
    assert (Path(site) / "nvidia" / "cu13" / "include" / "nvrtc.h").is_file()
    return python, Path(site)


@pytest.fixture
def cuda_home(site_dir, tmp_path):
    """A CUDA 13.0 toolkit's shape without nvrtc, from the runtime wheel's real files (see the module docstring)."""
    _python, site = site_dir
    wheel = site / "nvidia" / "cu13"
    home = tmp_path / "cuda-13.0"
    target = home / "targets" / TARGETS.get(platform.machine(), f"{platform.machine()}-linux")
    (target / "lib" / "stubs").mkdir(parents=True)
    shutil.copytree(wheel / "include", target / "include", ignore=shutil.ignore_patterns("nvrtc*.h"))
    shutil.copy2(wheel / "lib" / "libcudart.so.13", target / "lib" / "libcudart.so.13")
    (target / "lib" / "libcudart.so").symlink_to("libcudart.so.13")
    stub = tmp_path / "cuda_stub.c"
    stub.write_text("int cuInit(unsigned int flags) { (void)flags; return 0; }\n")
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", stub, "-o", target / "lib" / "stubs" / "libcuda.so"],
        check=True,
    )
    (home / "include").symlink_to(target.relative_to(home) / "include")
    (home / "lib64").symlink_to(target.relative_to(home) / "lib")
    (home / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": "13.0"}}))
    assert not (home / "include" / "nvrtc.h").exists()
    return home


def toolchain_gaps(site_dir, home, *args):
    python, _site = site_dir
    done = subprocess.run(
        [python, SCRIPT, "--cuda-home", str(home), *args], capture_output=True, text=True, check=False, timeout=120
    )
    return done.returncode, json.loads(done.stdout), done.stderr


def flashinfer_link(site_dir, home, tmp_path):
    """Compile and link PROGRAM as FlashInfer 0.6.18 links fused_moe_120 (its link line, read from its source)."""
    _python, site = site_dir
    jit = site / "flashinfer" / "jit"
    text = (jit / "cpp_ext.py").read_text()
    # The exact lines the script mirrors, in the installed 0.6.18 source.
    for line in ('"$cuda_home/include",', '"-L$cuda_home/lib64",', '"-L$cuda_home/lib64/stubs",', '"-lcudart",'):
        assert line in text, line
    assert 'extra_ldflags=["-lnvrtc"],' in (jit / "fused_moe.py").read_text()
    source = tmp_path / "nvrtc_version.cpp"
    source.write_text(PROGRAM)
    exe = tmp_path / "nvrtc_version"
    argv = ["c++", "-std=c++17", "-isystem", f"{home}/include", source, f"-L{home}/lib64", f"-L{home}/lib64/stubs"]
    argv += ["-lcudart", "-lcuda", "-lnvrtc", "-o", exe]
    return subprocess.run(argv, capture_output=True, text=True, check=False), exe


def test_flags_are_read_from_the_installed_flashinfer_source(site_dir, cuda_home):
    rc, report, _err = toolchain_gaps(site_dir, cuda_home, "--no-check")
    assert rc == 0
    assert report["flags_source"].startswith("flashinfer-python 0.6.18 source: "), report["flags_source"]
    assert report["flags"]["ldflags"] == [
        "-shared",
        "-L$cuda_home/lib64",
        "-L$cuda_home/lib64/stubs",
        "-lcudart",
        "-lcuda",
    ]
    assert report["flags"]["module_ldflags"] == ["-lnvrtc"]
    assert report["flags"]["includes"] == ["$cuda_home/include"]


def test_bare_layout_fails_at_the_header(site_dir, cuda_home):
    rc, report, err = toolchain_gaps(site_dir, cuda_home)
    assert rc == 1
    assert report["check"]["stage"] == "compile"
    assert "nvrtc.h: No such file or directory" in report["check"]["output"], report["check"]
    assert "nvrtc.h: No such file or directory" in err


def test_pitfall_lnvrtc_beside_the_soname_is_not_on_flashinfers_link_line(site_dir, cuda_home, tmp_path):
    """The earlier fix's layout (issue 17): header linked, libnvrtc.so in the wheel's lib folder: ld still fails."""
    _python, site = site_dir
    wheel_lib = site / "nvidia" / "cu13" / "lib"
    (cuda_home / "include" / "nvrtc.h").symlink_to(site / "nvidia" / "cu13" / "include" / "nvrtc.h")
    (wheel_lib / "libnvrtc.so").symlink_to(wheel_lib / "libnvrtc.so.13")
    try:
        linked, _exe = flashinfer_link(site_dir, cuda_home, tmp_path)
        assert linked.returncode != 0
        assert "cannot find -lnvrtc" in linked.stderr, linked.stderr
        rc, report, err = toolchain_gaps(site_dir, cuda_home)
        assert rc == 1
        assert report["check"]["stage"] == "link"
        assert "cannot find -lnvrtc" in report["check"]["output"] and "cannot find -lnvrtc" in err
    finally:
        (wheel_lib / "libnvrtc.so").unlink()


def test_apply_closes_both_gaps_where_flashinfer_looks_and_links(site_dir, cuda_home, tmp_path):
    _python, site = site_dir
    before, _exe = flashinfer_link(site_dir, cuda_home, tmp_path)
    assert before.returncode != 0
    rc, report, err = toolchain_gaps(site_dir, cuda_home, "--lib", "nvrtc", "--apply")
    assert rc == 0, (report, err)
    applied = dict(report["applied"])
    wheel = site / "nvidia" / "cu13"
    assert applied[f"{cuda_home}/include/nvrtc.h"] == str(wheel / "include" / "nvrtc.h")
    assert applied[f"{cuda_home}/lib64/libnvrtc.so"] == str(wheel / "lib" / "libnvrtc.so.13")
    assert report["remaining"] == []
    assert report["check"]["ok"] is True and report["check"]["stage"] == "link"
    assert report["check"]["command"][-6:-2] == [
        f"-L{cuda_home}/lib64/stubs",
        "-lcudart",
        "-lcuda",
        "-lnvrtc",
    ]
    # The same link with the test's own c++ line, then the program: header and library are the real nvrtc 13.0.
    linked, exe = flashinfer_link(site_dir, cuda_home, tmp_path)
    assert linked.returncode == 0, linked.stderr
    ran = subprocess.run(
        [exe], capture_output=True, text=True, check=False, env={**os.environ, "LD_LIBRARY_PATH": str(wheel / "lib")}
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "nvrtc 13.0"
    # Idempotent: a second run finds nothing to do and still links.
    rc, again, _err = toolchain_gaps(site_dir, cuda_home, "--lib", "nvrtc", "--apply")
    assert rc == 0 and again["applied"] == [] and again["check"]["ok"] is True


# The machine's own CUDA 13.0 toolkit ($CUDA_HOME, else /usr/local/cuda -> cuda-13.0 here; the nvcc on PATH is a
# wrapper script that execs its bin/nvcc): installed without nvrtc, like the H200 host's. Left untouched: the test
# works on a tree of symlinks to its files (cp -as), as device/toolchain/real_toolkit.sh does on a device machine.
REAL_TOOLKIT = Path(os.environ.get("CUDA_HOME") or "/usr/local/cuda").resolve()


@pytest.fixture
def real_cuda_home(tmp_path):
    if not (REAL_TOOLKIT / "include" / "cuda_runtime.h").is_file():
        pytest.fail(f"no CUDA toolkit at {REAL_TOOLKIT} (set CUDA_HOME): these machines carry CUDA 13.0's")
    home = tmp_path / "cuda-real"
    subprocess.run(["cp", "-as", str(REAL_TOOLKIT), str(home)], check=True)
    # cp -s turns the toolkit's own folder links (lib64 -> lib) into absolute links to the real toolkit: a write
    # through one would change it. Each becomes the toolkit's own relative link again, inside the tree.
    for path in sorted(home.rglob("*")):
        source = Path(os.readlink(path)) if path.is_symlink() else None
        if source is not None and source.is_symlink() and source.is_dir():
            path.unlink()
            path.symlink_to(os.readlink(source))
    escapes = [p for p in home.rglob("*") if p.is_dir() and REAL_TOOLKIT in {p.resolve(), *p.resolve().parents}]
    assert not escapes, f"folders of the tree resolve into the real toolkit: {escapes[:3]}"
    assert not (home / "include" / "nvrtc.h").exists(), "this toolkit has nvrtc: the gap is not there to close"
    stubs = home / "lib64" / "stubs"
    if not (stubs / "libcuda.so").exists():
        # This machine's toolkit ships no driver stub (a full NVIDIA installer's does): the one file made here.
        stubs.mkdir(parents=True, exist_ok=True)
        stub = tmp_path / "cuda_stub.c"
        stub.write_text("int cuInit(unsigned int flags) { (void)flags; return 0; }\n")
        subprocess.run(
            ["gcc", "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", stub, "-o", stubs / "libcuda.so"], check=True
        )
    return home


def test_pitfall_lnvrtc_closed_on_the_machines_real_toolkit_and_linked_by_its_nvcc(site_dir, real_cuda_home, tmp_path):
    # Seed 004's layer 3 on a real CUDA 13.0 toolkit without nvrtc: FlashInfer's own link line fails, --apply closes
    # the gaps where that line looks, and the real nvcc (the toolkit's own driver) then links and the program runs.
    _python, site = site_dir
    home = real_cuda_home
    before, _exe = flashinfer_link(site_dir, home, tmp_path)
    assert before.returncode != 0
    rc, report, err = toolchain_gaps(site_dir, home, "--lib", "nvrtc", "--apply")
    assert rc == 0, (report, err)
    assert report["remaining"] == [] and report["check"]["ok"] is True, report
    wheel = site / "nvidia" / "cu13"
    source = tmp_path / "nvrtc_version.cpp"
    source.write_text(PROGRAM)
    exe = tmp_path / "nvrtc_version_nvcc"
    argv = [str(home / "bin" / "nvcc"), "-isystem", f"{home}/include", str(source), f"-L{home}/lib64"]
    argv += [f"-L{home}/lib64/stubs", "-lcudart", "-lcuda", "-lnvrtc", "-o", str(exe)]
    linked = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300)
    assert linked.returncode == 0, linked.stdout + linked.stderr
    ran = subprocess.run(
        [exe],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "LD_LIBRARY_PATH": f"{wheel / 'lib'}:{home / 'lib64'}"},
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "nvrtc 13.0"
    # The real toolkit is as it was: every change went into the tree of links.
    assert not (REAL_TOOLKIT / "lib64" / "libnvrtc.so").exists() and not (REAL_TOOLKIT / "include" / "nvrtc.h").exists()
    assert not (REAL_TOOLKIT / "lib64" / "stubs").exists()
