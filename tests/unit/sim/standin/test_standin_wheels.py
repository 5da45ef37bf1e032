# Copyright: gb10.serving maintainers
# Apache-2.0
"""The stand-in wheels are reproducible and carry the console script, the catalog and the pins."""

from __future__ import annotations

import zipfile
from pathlib import Path

from source_loader import load

REPO = Path(__file__).resolve().parents[4]
make_wheel = load("make_wheel", REPO / "sim" / "standin" / "make_wheel.py")
CATALOG = REPO / "plugins" / "module_utils" / "vllm_catalog" / "vllm-0.32.0.json"


def test_wheels_are_byte_for_byte_reproducible(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    for out in (first, second):
        make_wheel.main([str(out), str(CATALOG)])
    names = sorted(p.name for p in first.iterdir())
    assert names == ["flashinfer_python-0.6.18-py3-none-any.whl", "vllm-0.32.0-py3-none-any.whl"]
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes()
    with zipfile.ZipFile(first / names[1]) as wheel:
        files = wheel.namelist()
        assert "vllm/_standin/catalog/vllm-0.32.0.json" in files
        assert "vllm = vllm._standin.cli:entry" in wheel.read("vllm-0.32.0.dist-info/entry_points.txt").decode()
        assert "Requires-Dist: flashinfer-python==0.6.18" in wheel.read("vllm-0.32.0.dist-info/METADATA").decode()
    with zipfile.ZipFile(first / names[0]) as wheel:
        assert '__version__ = "0.6.18"' in wheel.read("flashinfer/__init__.py").decode()
