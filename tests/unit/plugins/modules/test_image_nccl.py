# Copyright: gb10.serving maintainers
# Apache-2.0
"""The image_nccl module: the probe inside a throwaway container of the image, never a pull in check mode."""

from __future__ import annotations

import importlib
import json

from module_harness import run_main

module = importlib.import_module("ansible_collections.gb10.serving.plugins.modules.image_nccl")
IMAGE = "gb10/vllm-serving:5d0c2a8e4b1f7c3a"
PROBE = {
    "distributions": {"nvidia-nccl-cu13": "2.30.4"},
    "libraries": [
        {"path": "/x/nvidia/nccl/lib/libnccl.so.2", "names": ["libnccl.so.2"], "sha256": "f" * 64, "wheel": True}
    ],
    "so_path": "",
}


def engine(local):
    calls = []

    def run_command(_self, argv, **_kwargs):
        calls.append(list(argv))
        if argv[1:3] == ["image", "inspect"]:
            return (0, "[]", "") if IMAGE in local else (1, "", "No such image")
        return 0, json.dumps(PROBE) + "\n", ""

    return calls, run_command


def test_reads_the_nccl_inside_the_image_with_no_network():
    calls, run_command = engine({IMAGE})
    result = run_main(module.main, {"image": IMAGE, "node": "spark-1"}, run_command)
    assert result["nccl"]["version"] == "2.30.4" and result["changed"] is False
    assert result["msg"].startswith("spark-1: NCCL 2.30.4 (wheel nvidia-nccl-cu13")
    [argv] = calls
    assert argv[:5] == ["docker", "run", "--rm", "--network", "none"] and "--pull" not in argv


def test_check_mode_never_pulls_and_says_when_the_image_is_absent():
    calls, run_command = engine({IMAGE})
    result = run_main(module.main, {"image": IMAGE, "_ansible_check_mode": True}, run_command)
    assert calls[-1][:5] == ["docker", "run", "--rm", "--pull", "never"] and result["nccl"]["version"] == "2.30.4"
    calls, run_command = engine(set())
    result = run_main(module.main, {"image": IMAGE, "_ansible_check_mode": True}, run_command)
    assert result["nccl"] is None and not [argv for argv in calls if argv[1] == "run"]
    assert any("real run" in warning for warning in result["warnings_emitted"])
