# Copyright: gb10.serving maintainers
# Apache-2.0
"""The planned image's name (its content tag) is computed once: by tasks/checks.yml where roles/node_preflight ran
it (its NCCL verdict needs the name before any change), reused by the role's preflight where node_preflight passed,
and computed by the preflight itself where it did not; the same name either way, and the wheelhouse listing the build
packs is the one the name was hashed from. Real ansible-playbook on a local host; ``docker`` is
tests/unit/fake_docker.py's stand-in (the base and no planned image held)."""

from __future__ import annotations

import json
import sys

from fake_docker import inspect, install
from task_file_runner import run_play

BASE = "registry:5000/gb10/vllm-standin@sha256:" + "0" * 64


def run(tmp_path, with_node_preflight):
    tmp_path.mkdir()
    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    (wheelhouse / "ray-2.60.0-py3-none-any.whl").write_bytes(b"a wheel")
    env, _state = install(tmp_path, {"localhost": {"images": {BASE: inspect("sha256:" + "9" * 64)}}})
    role = "gb10.serving.serving_image"
    tasks = []
    if with_node_preflight:
        tasks += [
            {"ansible.builtin.include_role": {"name": role, "tasks_from": "checks"}},
            {"ansible.builtin.set_fact": {"__node_preflight_passed": True}},
        ]
    tasks += [
        {"ansible.builtin.include_role": {"name": role, "tasks_from": "preflight"}},
        {
            "ansible.builtin.copy": {
                "content": "{{ {'local': _serving_image_local, 'wheels': __serving_image_wheels.files"
                " | map(attribute='path') | list} | to_json }}",
                "dest": str(tmp_path / "named.json"),
                "mode": "0600",
            }
        },
    ]
    play = [
        {
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "environment": {"FAKE_DOCKER_NODE": "localhost"},
            "vars": {
                "ansible_python_interpreter": sys.executable,
                "gb10_plan": {"image": BASE, "nccl": None},
                "serving_image_wheelhouse": str(wheelhouse),
                "gb10_gated_image_file": str(tmp_path / "serving-image.json"),
            },
            "tasks": tasks,
        }
    ]
    rc, out = run_play(tmp_path, play, "localhost,", env=env)
    assert rc == 0, out[-4000:]
    return json.loads((tmp_path / "named.json").read_text()), out


def test_the_name_node_preflight_computed_is_the_one_the_preflight_uses(tmp_path):
    reused, out = run(tmp_path / "reused", True)
    assert out.count("TASK [gb10.serving.serving_image : List the wheelhouse on the control machine]") == 1
    alone, out_alone = run(tmp_path / "alone", False)
    assert out_alone.count("TASK [gb10.serving.serving_image : List the wheelhouse on the control machine]") == 1
    assert reused["local"] == alone["local"] and reused["local"].startswith("gb10/vllm-serving:")
    assert [w.rsplit("/", 1)[1] for w in reused["wheels"]] == ["ray-2.60.0-py3-none-any.whl"]
