# Copyright: gb10.serving maintainers
# Apache-2.0
"""What the _lockstep tests share: the fixtures of real-shaped dpkg output and apt transcripts."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.gb10.serving.plugins.module_utils._lockstep.parse import parse_dpkg_query

REPO = Path(__file__).resolve().parents[5]

FIXTURES = REPO / "tests" / "unit" / "fixtures" / "lockstep"

# The path modinfo reported on a DGX Spark for the prebuilt 580-open module (shared fixtures, section 3).
PREBUILT = ["kernel/nvidia-580-open/nvidia.ko", "kernel/nvidia-580-open/nvidia-uvm.ko"]


def fixture(name):
    return (FIXTURES / name).read_text()


def packages(name):
    return parse_dpkg_query(fixture(name))
