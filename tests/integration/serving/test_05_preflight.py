# Copyright: gb10.serving maintainers
# Apache-2.0
"""Every violation before any change (issue 15): site.yml on the served site with a disarmed earlyoom on one node
and a model revision the hub does not have is refused once, naming both nodes' problems, before any node changes.
"""

from __future__ import annotations

import pytest

# Changes no engine: runs on the site as converged, the real engine in make test (conftest.py).
pytestmark = pytest.mark.converged_site

UNKNOWN_REVISION = "f" * 40
# SIGKILL above SIGTERM: earlyoom would kill before it ever asks (roles/memory_guard), on spark-2 only. Extra vars
# are templated per host, which makes a per-node value without another inventory.
PER_NODE_SIGKILL = "{{ '5%' if inventory_hostname == 'spark-2' else '2%' }}"
# Apt's package lists are the one thing the preflight may refresh (roles/nvidia_lockstep/tasks/checks.yml).
MAY_CHANGE = {"Refresh the package lists"}


def test_pitfall_disarmed_earlyoom_and_unknown_revision_refused_together_before_any_change(served_sim):
    before = {node: served_sim.exec(node, "cat", "/etc/default/earlyoom").stdout for node in ("spark-1", "spark-2")}
    runner = served_sim.playbook(
        "site.yml",
        {"memory_guard_sigkill_threshold": PER_NODE_SIGKILL, "model_weights_revision": UNKNOWN_REVISION},
        check=False,
    )
    assert runner.rc != 0
    failed = [e["event_data"] for e in runner.events if e.get("event") == "runner_on_failed"]
    assert [d["task"] for d in failed] == ["Refuse the site with every problem of every node (nothing has changed yet)"]
    message = failed[0]["res"]["msg"]
    print("\n" + message)
    assert message.startswith("2 problem(s) before any node changed:"), message
    assert f"spark-1: the hub http://hub:8080 has no revision {UNKNOWN_REVISION} of gb10-sim/tiny-moe" in message
    assert "spark-2: earlyoom would not fire: SIGKILL threshold 5.00% is above SIGTERM's 4.00%" in message
    changed = {
        e["event_data"]["task"]
        for e in runner.events
        if e.get("event") == "runner_on_ok" and e["event_data"].get("res", {}).get("changed")
    }
    assert changed <= MAY_CHANGE, changed
    plays = {e["event_data"].get("play") for e in runner.events if e.get("event") == "playbook_on_task_start"}
    assert "Host guard rails" not in plays, plays
    after = {node: served_sim.exec(node, "cat", "/etc/default/earlyoom").stdout for node in ("spark-1", "spark-2")}
    assert after == before
