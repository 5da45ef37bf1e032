# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 41 item 2: the rolling upgrade's drift check compares the running container with the same environment
roles/serving writes into engine.env: the plan's container_env, read once. The environment was built twice, and the
drift check's copy lacked HF_MODULES_CACHE and VLLM_CACHE_ROOT and retyped the FlashInfer path's default.

A container started from the engine.env the serving template renders shows no drift (the upgrade skips the node); a
changed profile env, or a changed cache path, does."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import yaml

from ansible_collections.gb10.serving.plugins.filter.rolling_upgrade import FilterModule

REPO = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(REPO / "tests" / "unit" / "roles" / "serving"))
sys.path.insert(0, str(REPO / "tests" / "unit" / "plugins" / "module_utils" / "_plan"))
from _plan_fixtures import replicas, run
from serving_render import environment

IMAGE = "registry:5000/vllm@sha256:" + "0" * 64
COMPARE = REPO / "roles" / "upgrade_node" / "tasks" / "compare.yml"


def engine_env(node):
    """roles/serving's engine.env.j2 rendered with the plan's node view, as docker --env-file reads it."""
    text = environment().get_template("engine.env.j2").render(ansible_managed="managed", _serving_node=node)
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def container(env, argv):
    """docker inspect of a running container started with that env file (plus the image's own env)."""
    held = ["PATH=/usr/local/sbin:/usr/bin", *(f"{name}={value}" for name, value in env.items())]
    return {
        "State": {"Running": True, "Status": "running"},
        "Config": {"Image": IMAGE, "Entrypoint": argv[:1], "Cmd": argv[1:], "Env": held},
    }


def drift(node, running):
    """roles/upgrade_node/tasks/compare.yml's __upgrade_node_drift: its expression as the file writes it, with the
    collection's filters under their FQCN."""
    tasks = yaml.safe_load(COMPARE.read_text())
    expression = next(t for t in tasks if "__upgrade_node_drift" in (t.get("ansible.builtin.set_fact") or {}))
    expression = expression["ansible.builtin.set_fact"]["__upgrade_node_drift"]
    variables = {
        "gb10_node_plan": node,
        "serving_gated_image_ref": IMAGE,
        "__upgrade_node_container": {"exists": True, "container": running},
        "__upgrade_node_gated": {},
    }
    env = environment()
    env.filters.update({f"gb10.serving.{name}": f for name, f in FilterModule().filters().items()})
    # the gated image file's filters: not reached where serving_gated_image_ref names the image (as here)
    env.filters.update(b64decode=base64.b64decode, from_json=json.loads)
    inner = expression.strip()
    assert inner.startswith("{{") and inner.endswith("}}"), expression
    return env.compile_expression(inner[2:-2])(**variables)


def test_the_drift_check_compares_the_environment_the_serving_template_writes():
    node = run(replicas(env={"VLLM_LOGGING_LEVEL": "DEBUG"}))["nodes"]["spark-a"]
    written = engine_env(node)
    # the whole container env, the cache paths included: what the drift check's copy used to miss
    assert written == node["container_env"]
    assert {"HF_MODULES_CACHE", "FLASHINFER_WORKSPACE_BASE", "VLLM_CACHE_ROOT", "VLLM_LOGGING_LEVEL"} <= set(written)
    assert drift(node, container(written, node["argv"])) == []


def test_a_changed_environment_is_drift():
    node = run(replicas(env={"VLLM_LOGGING_LEVEL": "DEBUG"}))["nodes"]["spark-a"]
    running = container(engine_env(node), node["argv"])
    moved = run(replicas(env={"VLLM_LOGGING_LEVEL": "INFO"}))["nodes"]["spark-a"]
    assert drift(moved, running) == ["environment VLLM_LOGGING_LEVEL: 'DEBUG' -> 'INFO'"]
    # a container started before the cache paths were in its env (or with other ones) is drift too
    older = container({k: v for k, v in engine_env(node).items() if k != "VLLM_CACHE_ROOT"}, node["argv"])
    assert drift(node, older) == ["environment VLLM_CACHE_ROOT: None -> '/root/.cache/vllm-cache'"]
