# Copyright: gb10.serving maintainers
# Apache-2.0
"""The catalog generator run inside an image, as the serving-image gate runs it (issue 38 item 2).

The simulation's real engine image (gb10-sim/vllm-cpu:0.32.0, make sim-real-image) with the collection's generator
mounted read-only, the gate's own argv (--network none, VLLM_TARGET_DEVICE=cpu, --stdout): the catalog of the image's
own parser, read by the module's own reader, must be the catalog the collection ships for 0.32.0 (which make
vllm-catalogs builds from vllm-cpu 0.32.0 in a venv). Measured: 44 s on the 2-core machine under load.
"""

from __future__ import annotations

import importlib
import json
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
IMAGE = "gb10-sim/vllm-cpu:0.32.0"
GENERATOR = REPO / "roles" / "serving_image" / "files" / "vllm_catalog_generate.py"
si = importlib.import_module("ansible_collections.gb10.serving.plugins.module_utils._serving_image")
catalog_mod = importlib.import_module("ansible_collections.gb10.serving.plugins.module_utils._vllm_catalog")

pytestmark = pytest.mark.skipif(
    subprocess.run(["docker", "image", "inspect", IMAGE], capture_output=True, check=False).returncode != 0,
    reason=f"{IMAGE} is not built (make sim-real-image)",
)


def test_the_generator_inside_the_real_engine_image_gives_the_shipped_catalog():
    inside = "/tmp/gb10-vllm-catalog-generate.py"
    argv = ["docker", "run", "--rm", "--network", "none", "--env", "VLLM_TARGET_DEVICE=cpu"]
    argv += ["--volume", f"{GENERATOR}:{inside}:ro", "--entrypoint", "python3", IMAGE, inside, "--stdout"]
    run = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    built = si.catalog_from_image(run.stdout, "0.32.0", "registry:5000/gb10/vllm-cpu@sha256:" + "0" * 64)
    assert built.pop("generated_from").startswith("registry:5000/gb10/vllm-cpu@sha256:")
    assert built == catalog_mod.load("0.32.0")
    assert json.loads(run.stdout.strip().splitlines()[-1])["platform"] == "cpu"
