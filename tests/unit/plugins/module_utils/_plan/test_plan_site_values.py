# Copyright: gb10.serving maintainers
# Apache-2.0
"""What the plan owns at its top level for the roles and playbooks that used to read the profile (issue 15 item 2):
the image gate's critical pins and the context ladder's rungs."""

from __future__ import annotations

import copy

from _plan_fixtures import shipped, shipped_plan

from ansible_collections.gb10.serving.plugins.module_utils import _plan as plan_mod


def test_plan_carries_the_critical_pins_and_the_ladder_rungs():
    replicas = shipped_plan("sim", "sim-replicas")
    assert replicas["critical_pins"] == {"flashinfer-python": "0.6.18"}
    assert replicas["context_rungs"] == shipped("sim")["profiles"]["sim-replicas"]["context_rungs"]
    # A profile without rungs climbs the plan's default ones.
    assert shipped_plan("sim", "sim-tp")["context_rungs"] == list(plan_mod.LADDER_RUNGS)


def test_plan_rungs_and_pins_are_plain_values():
    site = shipped("sim")
    profiles = copy.deepcopy(site["profiles"])
    profiles["sim-replicas"]["context_rungs"] = ["8192", 16384]
    profiles["sim-replicas"]["image"].pop("critical_pins")
    result = plan_mod.plan(
        "sim-replicas", profiles, site["nodes"], **{k: site[k] for k in ("fabric_cidr", "ray_head", "ray_workers")}
    )
    assert result["context_rungs"] == [8192, 16384] and result["critical_pins"] == {}
