# Copyright: gb10.serving maintainers
# Apache-2.0
"""The serving_image_gate module's check mode (issue 37 item 3): it never pulls, and says when it cannot probe."""

from __future__ import annotations

import importlib
import json

from module_harness import run_main

gate = importlib.import_module("ansible_collections.gb10.serving.plugins.modules.serving_image_gate")

BASE = "registry:5000/gb10/vllm-standin@sha256:" + "0" * 64
IMAGE = "gb10/vllm-serving:5d0c2a8e4b1f7c3a"
DISTS = {"vllm": ["0.32.0"], "flashinfer-python": ["0.6.18"]}


def engine(local):
    """A docker client that holds the images in ``local``; every argv it was given, in order."""
    calls = []

    def run_command(_self, argv, **_kwargs):
        calls.append(list(argv))
        if argv[1:3] == ["image", "inspect"]:
            return (0, "[]", "") if argv[3] in local else (1, "", f"No such image: {argv[3]}")
        image = next(word for word in argv if word in (BASE, IMAGE))
        if "--pull" in argv and image not in local:
            return 125, "", f"Unable to find image '{image}' locally"
        if "ray" in argv and "--version" in argv:
            return 0, "ray, version 2.60.0\n", ""
        built = IMAGE in argv
        dists = {**DISTS, "ray": ["2.60.0"]} if built else DISTS
        out = {"python": "3.12.3", "distributions": dists}
        if built:
            out["ray"] = {"imported": True, "version": "2.60.0"}
        return 0, json.dumps(out) + "\n", ""

    return calls, run_command


def run(local, check):
    calls, run_command = engine(local)
    args = {"base": BASE, "image": IMAGE, "ray_version": "2.60.0", "_ansible_check_mode": check}
    return calls, run_main(gate.main, args, run_command)


def test_check_mode_probes_local_images_without_ever_pulling():
    calls, result = run({BASE, IMAGE}, check=True)
    assert result["passed"] is True, result
    runs = [argv for argv in calls if argv[1] == "run"]
    assert len(runs) == 3 and all(argv[2:5] == ["--rm", "--pull", "never"] for argv in runs), runs


def test_check_mode_says_it_cannot_probe_an_image_the_node_does_not_hold():
    for local in ({BASE}, {IMAGE}):
        calls, result = run(local, check=True)
        assert result["passed"] is None and not result["failed"], result
        assert not [argv for argv in calls if argv[1] == "run"], calls
        missing = IMAGE if IMAGE not in local else BASE
        assert any(missing in w and "real run" in w for w in result["warnings_emitted"]), result


def test_a_real_run_may_pull_as_before():
    calls, result = run({BASE, IMAGE}, check=False)
    assert result["passed"] is True, result
    assert all("--pull" not in argv for argv in calls), calls
