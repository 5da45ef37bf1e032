"""roles/serving_image/files/toolchain_gaps.py: each CUDA toolchain gap fixed only where it exists (seed 004)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from source_loader import load

SCRIPT = Path(__file__).resolve().parents[5] / "roles" / "serving_image" / "files" / "toolchain_gaps.py"
tg = load("toolchain_gaps", SCRIPT)

WHEEL = "/venv/site-packages/nvidia/cu13"


def test_pitfall_nvrtc_header_only_in_wheel():
    links = tg.header_links([("nvrtc.h", f"{WHEEL}/include/nvrtc.h")], "/usr/local/cuda/include", {"cuda.h"})
    assert links == [("/usr/local/cuda/include/nvrtc.h", f"{WHEEL}/include/nvrtc.h")]


def test_header_present_in_cuda_include_is_left_alone():
    assert tg.header_links([("nvrtc.h", f"{WHEEL}/include/nvrtc.h")], "/cuda/include", {"nvrtc.h"}) == []


def test_no_cuda_include_dir_links_nothing():
    assert tg.header_links([("nvrtc.h", f"{WHEEL}/include/nvrtc.h")], None, set()) == []


def test_first_wheel_carrying_a_header_wins():
    headers = [("crt/host_defines.h", "/a/include/crt/host_defines.h"), ("crt/host_defines.h", "/b/x.h")]
    assert tg.header_links(headers, "/cuda/include", set()) == [
        ("/cuda/include/crt/host_defines.h", "/a/include/crt/host_defines.h")
    ]


CPP_EXT_0_6_18 = """
def get_system_includes(cuda_home: str) -> List:
    system_includes = [
        sysconfig.get_path("include"),
        "$cuda_home/include",
        tvm_ffi.libinfo.find_include_path(),
    ]
    return system_includes

def generate_ninja_build_for_op(name, sources, extra_cflags, extra_cuda_cflags, extra_ldflags, extra_include_dirs):
    ldflags = [
        "-shared",
        "-L$cuda_home/lib64",
        "-L$cuda_home/lib64/stubs",
        "-lcudart",
        "-lcuda",
    ]
"""
FUSED_MOE_0_6_18 = """
def gen_cutlass_fused_moe_module(nvcc_flags, device_arch, use_fast_build=False):
    return gen_jit_spec(f"fused_moe_{device_arch}", sources, extra_cuda_cflags=nvcc_flags, extra_ldflags=["-lnvrtc"])
"""
FLAGS = tg.FLASHINFER_FLAGS["0.6.18"]


def test_flags_read_from_flashinfer_source_equal_the_table():
    # Cut from the released flashinfer-python 0.6.18 wheel (jit/cpp_ext.py, jit/fused_moe.py); the integration test
    # tests/integration/test_toolchain_gaps_real_wheels.py reads the whole real files.
    assert tg.flags_from_source(CPP_EXT_0_6_18, FUSED_MOE_0_6_18) == FLAGS


def test_flags_of_another_shape_are_not_guessed():
    assert tg.flags_from_source(CPP_EXT_0_6_18, "def gen_cutlass_fused_moe_module(): pass") is None
    assert tg.flags_from_source("def get_system_includes(): pass", FUSED_MOE_0_6_18) is None
    assert tg.flags_from_source("def (", FUSED_MOE_0_6_18) is None


def test_flags_fall_back_to_the_table_with_the_version_named(tmp_path):
    (tmp_path / "flashinfer" / "jit").mkdir(parents=True)

    class Spec:
        submodule_search_locations = (str(tmp_path / "flashinfer"),)

    flags, source = tg.flashinfer_flags(lambda _name: Spec, lambda _dist: "0.6.18")
    assert flags == FLAGS
    assert source.startswith("table FLASHINFER_FLAGS['0.6.18'] (") and "cpp_ext.py: No such file" in source
    flags, source = tg.flashinfer_flags(lambda _name: Spec, lambda _dist: "0.7.0")
    assert flags is None and "flashinfer-python 0.7.0" in source and "['0.6.17', '0.6.18']" in source


def test_flags_read_from_the_installed_package_first(tmp_path):
    jit = tmp_path / "flashinfer" / "jit"
    jit.mkdir(parents=True)
    (jit / "cpp_ext.py").write_text(CPP_EXT_0_6_18.replace("lib64/stubs", "lib/stubs"))
    (jit / "fused_moe.py").write_text(FUSED_MOE_0_6_18)

    class Spec:
        submodule_search_locations = (str(tmp_path / "flashinfer"),)

    flags, source = tg.flashinfer_flags(lambda _name: Spec, lambda _dist: "0.6.18")
    assert "-L$cuda_home/lib/stubs" in flags["ldflags"]
    assert source == f"flashinfer-python 0.6.18 source: {jit}/cpp_ext.py, {jit}/fused_moe.py"


def test_cuda_home_follows_flashinfer_get_cuda_path():
    assert tg.flashinfer_cuda_home({"CUDA_HOME": "/a", "CUDA_PATH": "/b"}, lambda _c: "/c/bin/nvcc") == "/a"
    assert tg.flashinfer_cuda_home({"CUDA_PATH": "/b"}, lambda _c: "/c/bin/nvcc") == "/b"
    assert tg.flashinfer_cuda_home({}, lambda _c: "/opt/cuda-13.0/bin/nvcc") == "/opt/cuda-13.0"
    assert tg.flashinfer_cuda_home({}, lambda _c: None) == "/usr/local/cuda"


def test_link_line_search_dirs_and_libs():
    assert tg.search_dirs(FLAGS, "/usr/local/cuda") == ["/usr/local/cuda/lib64", "/usr/local/cuda/lib64/stubs"]
    assert tg.link_libs(FLAGS) == ["cudart", "cuda", "nvrtc"]


def test_pitfall_lnvrtc_only_soname():
    """Seed 004 layer 3 / issue 17: the unversioned name goes where FlashInfer's -L searches, not beside the SONAME."""
    dirs = ["/usr/local/cuda/lib64", "/usr/local/cuda/lib64/stubs"]
    wheel = [f"{WHEEL}/lib/libnvrtc.so.13", f"{WHEEL}/lib/libnvrtc-builtins.so.13.0", f"{WHEEL}/lib/libnvrtc.so"]
    links = tg.soname_links(wheel, {"nvrtc"}, dirs, {"libcudart.so", "libcuda.so"})
    assert links == [("/usr/local/cuda/lib64/libnvrtc.so", f"{WHEEL}/lib/libnvrtc.so.13")]
    assert tg.missing_libs({"nvrtc"}, {"libcudart.so"}, links) == []


def test_unversioned_library_on_the_link_line_or_not_wanted_is_left_alone():
    dirs = ["/cuda/lib64", "/cuda/lib64/stubs"]
    assert tg.soname_links([f"{WHEEL}/lib/libnvrtc.so.13"], {"nvrtc"}, dirs, {"libnvrtc.so"}) == []
    assert tg.soname_links([f"{WHEEL}/lib/libnvrtc.so.13"], {"nvrtc"}, dirs, {"libnvrtc.a"}) == []
    assert tg.soname_links([f"{WHEEL}/lib/libcublas.so.13"], {"nvrtc"}, dirs, set()) == []
    assert tg.missing_libs({"nvrtc"}, set(), []) == ["nvrtc"]


def test_the_toolkits_major_wins_over_a_newer_wheel():
    libs = ["/s/nvidia/cu12/lib/libnvrtc.so.12", "/s/nvidia/cu13/lib/libnvrtc.so.13"]
    assert tg.soname_links(libs, {"nvrtc"}, ["/c/lib64"], set(), 12)[0][1] == libs[0]
    assert tg.soname_links(libs, {"nvrtc"}, ["/c/lib64"], set(), None)[0][1] == libs[1]


def test_check_uses_flashinfers_include_line_link_line_and_driver():
    compile_argv, link_argv = tg.check_commands("c++", "/usr/local/cuda", FLAGS, "p.cpp", "p.o", "p.so")
    assert compile_argv == [
        "c++",
        "-std=c++17",
        "-isystem",
        "/usr/local/cuda/include",
        "-fPIC",
        "-c",
        "p.cpp",
        "-o",
        "p.o",
    ]
    assert link_argv == [
        "c++",
        "p.o",
        "-shared",
        "-L/usr/local/cuda/lib64",
        "-L/usr/local/cuda/lib64/stubs",
        "-lcudart",
        "-lcuda",
        "-lnvrtc",
        "-o",
        "p.so",
    ]
    assert "#include <nvrtc.h>" in tg.probe_source(["cudart", "cuda", "nvrtc"])
    assert "nvrtcVersion(" in tg.probe_source(["nvrtc"])


def test_no_compiler_beside_nvcc_fails_and_without_a_toolkit_is_skipped(tmp_path):
    assert tg.check(str(tmp_path), FLAGS, {"CXX": "no-such-c++"})["ok"] is None
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "nvcc").write_text("")
    result = tg.check(str(tmp_path), FLAGS, {"CXX": "no-such-c++"})
    assert result["ok"] is False and "no C++ compiler 'no-such-c++'" in result["output"]


@pytest.mark.skipif(not shutil.which("c++"), reason="needs c++")
def test_a_cxx_without_any_cuda_home_is_skipped_not_failed(tmp_path):
    """The sim-real image has g++ (torch's inductor) and no CUDA toolkit: the probe would fail on nvrtc.h."""
    result = tg.check(str(tmp_path / "no-cuda"), FLAGS, {})
    assert result["ok"] is None and "no CUDA toolkit at" in result["output"]


def _layout(tmp_path, old_fix=False):
    """A pip-wheel nvrtc (real ELF built by gcc) and a CUDA home with include/ and lib64/, like the image's."""
    site_dir = tmp_path / "site-packages"
    wheel = site_dir / "nvidia/cu13"
    (wheel / "include").mkdir(parents=True)
    (wheel / "lib").mkdir(parents=True)
    (wheel / "include/nvrtc.h").write_text(
        "typedef enum { NVRTC_SUCCESS = 0 } nvrtcResult;\n"
        'extern "C" nvrtcResult nvrtcVersion(int *major, int *minor);\n'
    )
    (tmp_path / "nvrtc.c").write_text("int nvrtcVersion(int *a, int *b) { *a = 13; *b = 0; return 0; }\n")
    subprocess.run(
        [
            "gcc",
            "-shared",
            "-fPIC",
            "-Wl,-soname,libnvrtc.so.13",
            tmp_path / "nvrtc.c",
            "-o",
            wheel / "lib/libnvrtc.so.13",
        ],
        check=True,
    )
    cuda = tmp_path / "cuda"
    (cuda / "include").mkdir(parents=True)
    (cuda / "include/cuda.h").write_text("/* cuda */")
    (cuda / "lib64/stubs").mkdir(parents=True)
    for name, where in (("cudart", "lib64"), ("cuda", "lib64/stubs")):
        subprocess.run(
            ["gcc", "-shared", "-fPIC", tmp_path / "nvrtc.c", "-o", cuda / where / f"lib{name}.so"], check=True
        )
    if old_fix:
        (cuda / "include/nvrtc.h").symlink_to(wheel / "include/nvrtc.h")
        (wheel / "lib/libnvrtc.so").symlink_to(wheel / "lib/libnvrtc.so.13")
    return site_dir, cuda


needs_cxx = pytest.mark.skipif(not (shutil.which("gcc") and shutil.which("c++")), reason="needs gcc and c++")


@needs_cxx
def test_pitfall_lnvrtc_beside_the_soname_still_fails_the_link(tmp_path, capsys, monkeypatch):
    """Issue 17: the earlier fix (libnvrtc.so beside the SONAME) leaves `cannot find -lnvrtc` on FlashInfer's line."""
    site_dir, cuda = _layout(tmp_path, old_fix=True)
    monkeypatch.setattr(tg.site, "getsitepackages", lambda: [str(site_dir)])
    monkeypatch.setattr(tg, "flashinfer_flags", lambda: (FLAGS, "table"))
    assert tg.main(["--cuda-home", str(cuda), "--lib", "nvrtc"], environ={}) == 1
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert report["check"]["stage"] == "link" and "cannot find -lnvrtc" in report["check"]["output"]
    assert "cannot find -lnvrtc" in out.err
    assert report["found"]["libraries"] == [[f"{cuda}/lib64/libnvrtc.so", f"{site_dir}/nvidia/cu13/lib/libnvrtc.so.13"]]


@needs_cxx
def test_apply_links_both_gaps_where_flashinfer_looks_then_nothing_remains(tmp_path, capsys, monkeypatch):
    site_dir, cuda = _layout(tmp_path)
    monkeypatch.setattr(tg.site, "getsitepackages", lambda: [str(site_dir)])
    monkeypatch.setattr(tg, "flashinfer_flags", lambda: (FLAGS, "table"))
    assert tg.main(["--cuda-home", str(cuda), "--lib", "nvrtc", "--apply"], environ={}) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["check"]["ok"] is True and report["remaining"] == []
    assert os.readlink(cuda / "include/nvrtc.h") == str(site_dir / "nvidia/cu13/include/nvrtc.h")
    assert os.readlink(cuda / "lib64/libnvrtc.so") == str(site_dir / "nvidia/cu13/lib/libnvrtc.so.13")
    assert not (site_dir / "nvidia/cu13/lib/libnvrtc.so").exists()
    assert tg.main(["--cuda-home", str(cuda), "--lib", "nvrtc", "--apply"], environ={}) == 0
    assert '"applied": []' in capsys.readouterr().out


def test_no_cuda_home_closes_nothing_and_passes(tmp_path, capsys, monkeypatch):
    site_dir = tmp_path / "site-packages"
    (site_dir / "nvidia/cu13/lib").mkdir(parents=True)
    (site_dir / "nvidia/cu13/lib/libnvrtc.so.13").write_text("ELF")
    monkeypatch.setattr(tg.site, "getsitepackages", lambda: [str(site_dir)])
    assert tg.main(["--cuda-home", str(tmp_path / "none"), "--apply"], environ={"CXX": "no-such-c++"}) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["applied"] == [] and report["check"]["ok"] is None
