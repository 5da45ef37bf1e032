# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 39, item 4, before any change: node_preflight's one refusal names the tensor-parallel ranks whose images
load different NCCL builds, or one below the plan's minimum, together with every other problem of every node.

Run by the real ansible-playbook on three local hosts: roles/serving_image/tasks/checks.yml (as node_preflight
includes it) names the planned image by its content and reads, on each rank that already holds it, the NCCL it
loads (its gated-image record where the record is of that very image, else a throwaway container), then
roles/node_preflight's own refusal task judges the group. ``docker`` is tests/unit/fake_docker.py's stand-in (no
engine runs in the unit tests): the two reads gb10.serving.image_identity and gb10.serving.image_nccl make.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml
from fake_docker import inspect, install
from task_file_runner import run_play

REPO = Path(__file__).resolve().parents[4]
BASE = "registry:5000/gb10/vllm-standin@sha256:" + "0" * 64
HELD_ID = "sha256:" + "1" * 64


def probe(version, sha):
    """What NCCL_PROBE prints inside an image carrying PyPI's nvidia-nccl-cu12 wheel."""
    lib = "/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2"
    return {
        "distributions": {"nvidia-nccl-cu12": version},
        "libraries": [{"path": lib, "names": ["libnccl.so.2"], "sha256": sha, "wheel": True}],
        "so_path": "",
    }


def test_pitfall_nccl_builds_differ_recorded_per_node_refused_by_node_preflight_with_every_other_problem(tmp_path):
    # spark-1 holds the planned image and its record states 2.30.4 (its probe would say otherwise: the record wins,
    # no container); spark-2 holds the planned image with no record: read in a container, 2.28.9 (another build);
    # spark-3 holds no planned image yet (left to distribute) and has another node problem.
    nodes = {
        "spark-1": {
            "images": {BASE: inspect("sha256:" + "9" * 64), "planned": inspect(HELD_ID)},
            "probe": probe("2.30.9", "f" * 64),
        },
        "spark-2": {"images": {"planned": inspect(HELD_ID)}, "probe": probe("2.28.9", "b" * 64)},
        "spark-3": {"images": {}, "probe": None},
    }
    env, state = install(tmp_path, nodes)
    records = {node: str(tmp_path / f"{node}-serving-image.json") for node in nodes}
    plan = {
        "image": BASE,
        "nccl": {"ranks": list(nodes), "min_version": "2.30.4", "min_source": "the GB10 default", "cuda_graphs": True},
    }
    hosts = {node: {"gb10_gated_image_file": records[node]} for node in nodes}
    hosts["spark-3"]["__reload_guard_problems"] = ["spark-3: Docker uses the systemd cgroup driver without the guard."]
    inventory = {
        "all": {
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
            "hosts": hosts,
        }
    }
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    [refusal] = [
        task
        for task in yaml.safe_load((REPO / "roles" / "node_preflight" / "tasks" / "main.yml").read_text())
        if task["name"].startswith("Refuse the site with every problem of every node")
    ]
    checks = {"ansible.builtin.include_role": {"name": "gb10.serving.serving_image", "tasks_from": "checks"}}
    record = {
        "local": "{{ _serving_image_local }}",
        "id": HELD_ID,
        "nccl": {
            "version": "2.30.4",
            "sha256": "a" * 64,
            "library": "/l/libnccl.so.2",
            "source": "wheel nvidia-nccl-cu12",
        },
    }
    common = {
        "hosts": "all",
        "gather_facts": False,
        "environment": {"FAKE_DOCKER_NODE": "{{ inventory_hostname }}"},
        "vars": {
            "gb10_plan": plan,
            "node_preflight_roles": ["reload_guard", "serving_image"],
            "node_preflight_check_fabric": False,
        },
    }
    play = [
        # the first look names the planned image; spark-1's record of it is then written, as distribute writes it
        dict(
            common,
            tasks=[
                checks,
                {
                    "ansible.builtin.copy": {
                        "content": "{{ record | to_json }}",
                        "dest": "{{ gb10_gated_image_file }}",
                        "mode": "0644",
                    },
                    "vars": {"record": record},
                    "when": "inventory_hostname == 'spark-1'",
                },
                {"ansible.builtin.file": {"path": str(state / "calls.log"), "state": "absent"}, "run_once": True},
            ],
        ),
        dict(common, tasks=[checks, refusal]),
    ]
    rc, out = run_play(
        tmp_path,
        play,
        str(tmp_path / "hosts.yml"),
        env=env,
    )
    assert rc == 2, out[-4000:]
    assert "3 problem(s) before any node changed" in out, out[-4000:]
    assert "spark-3: Docker uses the systemd cgroup driver without the guard." in out
    assert "the tensor-parallel ranks' images load different NCCL builds (spark-1: NCCL 2.30.4" in out
    assert "spark-2: NCCL 2.28.9 (wheel nvidia-nccl-cu12" in out and "sha256 bbbbbbbbbbbb" in out
    assert "spark-2: its image loads NCCL 2.28.9, below 2.30.4 (the GB10 default)" in out
    assert "spark-3: NCCL" not in out and "no NCCL recorded" not in out
    calls = (state / "calls.log").read_text().splitlines()
    # the second look: spark-1's record was of the image it holds (no container), spark-2 read in one, spark-3 none
    assert "spark-2 run --rm" in calls and not [c for c in calls if c.startswith(("spark-1 run", "spark-3 run"))]
