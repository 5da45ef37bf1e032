"""roles/serving_image/files/toolchain_gaps.py: each CUDA toolchain gap fixed only where it exists (seed 004)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[5] / "roles" / "serving_image" / "files" / "toolchain_gaps.py"
_spec = importlib.util.spec_from_file_location("toolchain_gaps", SCRIPT)
tg = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tg)

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


def test_pitfall_lnvrtc_only_soname():
    links = tg.soname_links([f"{WHEEL}/lib/libnvrtc.so.13", f"{WHEEL}/lib/libnvrtc-builtins.so.13.0"], {"nvrtc"})
    assert links == [(f"{WHEEL}/lib/libnvrtc.so", f"{WHEEL}/lib/libnvrtc.so.13")]


def test_unversioned_library_present_or_not_wanted_is_left_alone():
    present = [f"{WHEEL}/lib/libnvrtc.so.13", f"{WHEEL}/lib/libnvrtc.so"]
    assert tg.soname_links(present, {"nvrtc"}) == []
    assert tg.soname_links([f"{WHEEL}/lib/libcublas.so.13"], {"nvrtc"}) == []


def test_apply_links_both_gaps_then_nothing_remains(tmp_path, capsys, monkeypatch):
    site_dir = tmp_path / "site-packages"
    (site_dir / "nvidia/cu13/include").mkdir(parents=True)
    (site_dir / "nvidia/cu13/lib").mkdir(parents=True)
    (site_dir / "nvidia/cu13/include/nvrtc.h").write_text("/* nvrtc */")
    (site_dir / "nvidia/cu13/lib/libnvrtc.so.13").write_text("ELF")
    cuda = tmp_path / "cuda/include"
    cuda.mkdir(parents=True)
    (cuda / "cuda.h").write_text("/* cuda */")
    monkeypatch.setattr(tg.site, "getsitepackages", lambda: [str(site_dir)])
    assert tg.main(["--cuda-include", str(cuda), "--lib", "nvrtc", "--apply"]) == 0
    assert os.readlink(cuda / "nvrtc.h") == str(site_dir / "nvidia/cu13/include/nvrtc.h")
    assert os.readlink(site_dir / "nvidia/cu13/lib/libnvrtc.so") == str(site_dir / "nvidia/cu13/lib/libnvrtc.so.13")
    capsys.readouterr()
    assert tg.main(["--cuda-include", str(cuda), "--lib", "nvrtc", "--apply"]) == 0
    assert '"applied": []' in capsys.readouterr().out
