# Copyright: gb10.serving maintainers
# Apache-2.0
"""The plan states the systemd units (issue 15 item 2): each node's units in start order with their template,
container, Conflicts=, Requires= and watchdog, the unit whose engine answers /health, and what is site-wide (every
managed unit, each topology's, its services, the static ones, the retire phases). roles/serving and
playbooks/switch_topology.yml read nothing else. Tensor-parallel has two unit sets, one per launcher: Ray's
(sim-tp-ray: a Ray head with the vLLM that joins it, Ray workers) and vLLM's own multi-node launch (sim-tp: one
engine unit per rank, the head's serving, the others headless)."""

from __future__ import annotations

import json

import pytest
from _plan_fixtures import plan_mod, replicas, run, shipped_plan

RAY_SERVICES = ["gb10-ray-head.service", "gb10-ray-worker.service", "gb10-vllm-tp.service"]
MP_SERVICES = ["gb10-vllm-mp-rank.service", "gb10-vllm-mp.service"]
# Conflicts= of each unit set: every other set's service units, sorted
TP_SERVICES = sorted(RAY_SERVICES + MP_SERVICES)
NOT_RAY = sorted([*MP_SERVICES, "gb10-vllm.service"])
NOT_MP = sorted([*RAY_SERVICES, "gb10-vllm.service"])
REPLICA = {
    "units": [
        {
            "unit": "gb10-vllm.service",
            "template": "gb10-vllm.service.j2",
            "container": "gb10-vllm",
            "conflicts": TP_SERVICES,
            "requires": None,
            "watchdog": {
                "name": "replica",
                "timer": "gb10-watchdog-replica.timer",
                "service": "gb10-watchdog-replica.service",
                "unit": "gb10-vllm.service",
                "probe": "engine",
                "ray": None,
                "restart": ["gb10-vllm.service"],
                "kill": ["gb10-vllm"],
                "container": "gb10-vllm",
            },
            "warm": {
                "socket": "gb10-warm-agent-replica.socket",
                "service": "gb10-warm-agent-replica.service",
                "marker": "/run/gb10-warm/replica",
            },
        }
    ],
    "engine_unit": "gb10-vllm.service",
    "unit_names": [
        "gb10-watchdog-replica.timer",
        "gb10-watchdog-replica.service",
        "gb10-warm-agent-replica.socket",
        "gb10-warm-agent-replica.service",
        "gb10-vllm.service",
    ],
}
RAY_HEAD = {
    "units": [
        {
            "unit": "gb10-ray-head.service",
            "template": "gb10-ray.service.j2",
            "container": "gb10-ray-head",
            "conflicts": NOT_RAY,
            "requires": None,
            "watchdog": None,
            "warm": None,
        },
        {
            "unit": "gb10-vllm-tp.service",
            "template": "gb10-vllm-tp.service.j2",
            "container": "gb10-vllm-tp",
            "conflicts": NOT_RAY,
            # it joins the head's cluster: Requires=/After= its unit, in its container's PID namespace
            "requires": {"unit": "gb10-ray-head.service", "container": "gb10-ray-head"},
            "watchdog": {
                "name": "tp",
                "timer": "gb10-watchdog-tp.timer",
                "service": "gb10-watchdog-tp.service",
                "unit": "gb10-vllm-tp.service",
                "probe": "engine",
                # after a failed probe it reads the group's ranks in Ray, and it restarts the group: the head's Ray
                # with the engine, which dies first (issue 19 item 4)
                "ray": "gb10-ray-head",
                "restart": ["gb10-ray-head.service", "gb10-vllm-tp.service"],
                "kill": ["gb10-vllm-tp", "gb10-ray-head"],
                "container": "gb10-vllm-tp",
            },
            "warm": {
                "socket": "gb10-warm-agent-tp.socket",
                "service": "gb10-warm-agent-tp.service",
                "marker": "/run/gb10-warm/tp",
            },
        },
    ],
    "engine_unit": "gb10-vllm-tp.service",
    "unit_names": [
        "gb10-watchdog-tp.timer",
        "gb10-watchdog-tp.service",
        "gb10-warm-agent-tp.socket",
        "gb10-warm-agent-tp.service",
        "gb10-vllm-tp.service",
        "gb10-ray-head.service",
    ],
}
RAY_WORKER = {
    "units": [
        {
            "unit": "gb10-ray-worker.service",
            "template": "gb10-ray.service.j2",
            "container": "gb10-ray-worker",
            "conflicts": NOT_RAY,
            "requires": None,
            # no engine here: it restarts its own Ray when the head's GCS does not hold its raylet alive
            "watchdog": {
                "name": "ray-worker",
                "timer": "gb10-watchdog-ray-worker.timer",
                "service": "gb10-watchdog-ray-worker.service",
                "unit": "gb10-ray-worker.service",
                "probe": "raylet",
                "ray": None,
                "restart": ["gb10-ray-worker.service"],
                "kill": ["gb10-ray-worker"],
                "container": "gb10-ray-worker",
            },
            "warm": None,
        }
    ],
    "engine_unit": None,
    "unit_names": ["gb10-watchdog-ray-worker.timer", "gb10-watchdog-ray-worker.service", "gb10-ray-worker.service"],
}
MP_HEAD = {
    "units": [
        {
            "unit": "gb10-vllm-mp.service",
            "template": "gb10-vllm-mp.service.j2",
            "container": "gb10-vllm-mp",
            "conflicts": NOT_MP,
            "requires": None,
            # no Ray to read and no Ray to restart with it: the head's engine alone
            "watchdog": {
                "name": "mp",
                "timer": "gb10-watchdog-mp.timer",
                "service": "gb10-watchdog-mp.service",
                "unit": "gb10-vllm-mp.service",
                "probe": "engine",
                "ray": None,
                "restart": ["gb10-vllm-mp.service"],
                "kill": ["gb10-vllm-mp"],
                "container": "gb10-vllm-mp",
            },
            "warm": {
                "socket": "gb10-warm-agent-mp.socket",
                "service": "gb10-warm-agent-mp.service",
                "marker": "/run/gb10-warm/mp",
            },
        }
    ],
    "engine_unit": "gb10-vllm-mp.service",
    "unit_names": [
        "gb10-watchdog-mp.timer",
        "gb10-watchdog-mp.service",
        "gb10-warm-agent-mp.socket",
        "gb10-warm-agent-mp.service",
        "gb10-vllm-mp.service",
    ],
}
# A headless rank: its own engine container (the same template), no API, so no engine unit and no warm agent. Of
# its watchdog only what names and restarts it (what a headless rank's watchdog probes is not settled).
MP_RANK = {
    "units": [
        {
            "unit": "gb10-vllm-mp-rank.service",
            "template": "gb10-vllm-mp.service.j2",
            "container": "gb10-vllm-mp-rank",
            "conflicts": NOT_MP,
            "requires": None,
            "watchdog": {
                "name": "mp-rank",
                "timer": "gb10-watchdog-mp-rank.timer",
                "service": "gb10-watchdog-mp-rank.service",
                "unit": "gb10-vllm-mp-rank.service",
                "restart": ["gb10-vllm-mp-rank.service"],
                "kill": ["gb10-vllm-mp-rank"],
                "container": "gb10-vllm-mp-rank",
            },
            "warm": None,
        }
    ],
    "engine_unit": None,
    "unit_names": ["gb10-watchdog-mp-rank.timer", "gb10-watchdog-mp-rank.service", "gb10-vllm-mp-rank.service"],
}
UNIT_FIELDS = ("units", "engine_unit", "unit_names")
SIM_PROFILES = ("sim-replicas", "sim-tp", "sim-tp-ray")


# the watchdog's keys that a headless rank's watchdog is held to (test_sim_tp_mp_...)
RANK_WATCHDOG_KEYS = ("name", "timer", "service", "unit", "restart", "kill", "container")


def _units(entry, probe=True):
    units = {field: entry[field] for field in UNIT_FIELDS}
    if not probe:
        units["units"] = [
            dict(u, watchdog={k: u["watchdog"][k] for k in RANK_WATCHDOG_KEYS} if u["watchdog"] else None)
            for u in units["units"]
        ]
    return units


@pytest.fixture(scope="module")
def sim_plans():
    return {profile: shipped_plan("sim", profile) for profile in SIM_PROFILES}


def test_sim_replicas_every_node_runs_the_replica_unit_and_its_watchdog(sim_plans):
    result = sim_plans["sim-replicas"]
    assert result["violations"] == [] and set(result["nodes"]) == {"spark-1", "spark-2"}
    assert {host: _units(entry) for host, entry in result["nodes"].items()} == {
        "spark-1": REPLICA,
        "spark-2": REPLICA,
    }


def test_sim_tp_ray_the_head_starts_ray_then_vllm_and_the_worker_runs_ray_alone(sim_plans):
    result = sim_plans["sim-tp-ray"]
    assert result["violations"] == [] and result["launcher"] == "ray"
    assert {host: _units(entry) for host, entry in result["nodes"].items()} == {
        "spark-1": RAY_HEAD,
        "spark-2": RAY_WORKER,
    }
    assert [result["nodes"][h]["role"] for h in ("spark-1", "spark-2")] == ["ray_head", "ray_worker"]


def test_sim_tp_mp_the_head_runs_the_serving_engine_and_the_other_rank_its_headless_engine(sim_plans):
    result = sim_plans["sim-tp"]
    assert result["violations"] == [] and result["launcher"] == "mp"
    assert [result["nodes"][h]["role"] for h in ("spark-1", "spark-2")] == ["tp_head", "tp_rank"]
    assert _units(result["nodes"]["spark-1"]) == MP_HEAD
    assert _units(result["nodes"]["spark-2"], probe=False) == MP_RANK
    assert result["serving_hosts"] == ["spark-1"]


def test_every_node_has_one_watchdog_on_its_engine_or_else_its_ray_and_only_a_serving_node_an_engine(sim_plans):
    for result in sim_plans.values():
        for host, entry in result["nodes"].items():
            [watchdog] = [u["watchdog"] for u in entry["units"] if u["watchdog"]]
            assert (entry["engine_unit"] is not None) == entry["serves"] == (watchdog["probe"] == "engine"), host
            ray = [u for u in entry["units"] if u["template"] == "gb10-ray.service.j2"]
            # a node that serves no API watches its Ray (a Ray worker) or its one headless engine (an mp rank)
            assert watchdog["unit"] == (entry["engine_unit"] or (ray or entry["units"])[0]["unit"]), host
            assert watchdog["ray"] == (ray[0]["container"] if ray and entry["serves"] else None), host


def test_pitfall_tp_rank_died_engine_restarted_alone(sim_plans):
    # Issue 19 item 4: the engine restarted alone beside a Ray head whose GCS restarted (no cluster state survives
    # it) or a rank no cluster knows waits for a placement group that never comes. The head's watchdog restarts its
    # Ray with the engine (the engine's container killed first, then the Ray its PID namespace lives in); each
    # worker's restarts its own Ray unless the head's GCS holds its raylet alive.
    nodes = sim_plans["sim-tp-ray"]["nodes"]
    units = {host: {u["unit"]: u for u in entry["units"]} for host, entry in nodes.items()}
    head = next(u["watchdog"] for u in nodes["spark-1"]["units"] if u["watchdog"])
    assert head["restart"] == [u["unit"] for u in nodes["spark-1"]["units"]]
    assert head["kill"] == [units["spark-1"][u]["container"] for u in reversed(head["restart"])]
    engine = units["spark-1"][nodes["spark-1"]["engine_unit"]]
    assert head["kill"][-1] == engine["requires"]["container"] == head["ray"]
    worker = next(u["watchdog"] for u in nodes["spark-2"]["units"] if u["watchdog"])
    assert worker["restart"] == list(units["spark-2"]) and worker["probe"] == "raylet" and worker["ray"] is None
    assert sim_plans["sim-tp-ray"]["ray"]["gcs_address"] == nodes["spark-2"]["ray_start"][2].split("=", 1)[1]


def test_conflicts_are_symmetric_between_the_topologies():
    # A replica unit conflicts with every tensor-parallel service unit and each of those with every replica unit:
    # starting either topology on a node stops the other there (DESIGN section 5). In tensor-parallel the two
    # launchers' unit sets conflict the same way: starting the mp launch's engine stops a Ray head or worker there.
    site = plan_mod.plan(None, {}, {})["units"]
    services = {topology: set(units) for topology, units in site["services"].items()}
    conflicts, unit_set = {}, {}
    for name, roles in plan_mod.units.UNIT_SETS.items():
        for role in roles:
            for unit in plan_mod.units.node_units(role)["units"]:
                conflicts[unit["unit"]] = set(unit["conflicts"])
                unit_set[unit["unit"]] = name
    assert set(conflicts) == services["replicas"] | services["tensor_parallel"]
    assert {name: {u for u, n in unit_set.items() if n == name} for name in plan_mod.units.UNIT_SETS} == {
        "replicas": {"gb10-vllm.service"},
        "tp_ray": set(RAY_SERVICES),
        "tp_mp": set(MP_SERVICES),
    }
    for topology, other in (("replicas", "tensor_parallel"), ("tensor_parallel", "replicas")):
        for unit in services[topology]:
            assert services[other] <= conflicts[unit], unit
    for unit, theirs in conflicts.items():
        assert theirs == {u for u, name in unit_set.items() if name != unit_set[unit]}, unit
    assert all(a in conflicts[b] for a, theirs in conflicts.items() for b in theirs)


def test_every_unit_a_node_may_run_is_in_the_site_wide_set(sim_plans):
    for result in (*sim_plans.values(), run(replicas())):
        site = result["units"]
        for host, entry in result["nodes"].items():
            names = [u["unit"] for u in entry["units"]]
            names += [
                n for u in entry["units"] if u["watchdog"] for n in (u["watchdog"]["timer"], u["watchdog"]["service"])
            ]
            names += [n for u in entry["units"] if u["warm"] for n in (u["warm"]["socket"], u["warm"]["service"])]
            assert sorted(names) == sorted(entry["unit_names"]), host
            assert set(entry["unit_names"]) <= set(site["all"]), host
            assert set(entry["unit_names"]) <= set(site["topologies"][result["topology"]]), host
    site = sim_plans["sim-tp"]["units"]
    assert sorted(u for units in site["topologies"].values() for u in units) == sorted(site["all"])


def test_each_topologys_services_are_its_units_that_run_a_container_and_the_static_ones_its_watchdogs(sim_plans):
    # What the roles read instead of spelling units: a topology's services (Conflicts=, the fabric firewall's
    # Before=, the FlashInfer build's units to stop), and the units with no [Install] (a watchdog's service).
    site = plan_mod.plan(None, {}, {})["units"]
    assert site["services"] == {
        "replicas": ["gb10-vllm.service"],
        "tensor_parallel": [
            "gb10-ray-head.service",
            "gb10-vllm-tp.service",
            "gb10-ray-worker.service",
            "gb10-vllm-mp.service",
            "gb10-vllm-mp-rank.service",
        ],
    }
    assert site["agents"] == [
        "gb10-warm-agent-replica.socket",
        "gb10-warm-agent-replica.service",
        "gb10-warm-agent-tp.socket",
        "gb10-warm-agent-tp.service",
        "gb10-warm-agent-mp.socket",
        "gb10-warm-agent-mp.service",
    ]
    assert site["static"] == [
        "gb10-watchdog-replica.service",
        "gb10-watchdog-tp.service",
        "gb10-watchdog-ray-worker.service",
        "gb10-watchdog-mp.service",
        "gb10-watchdog-mp-rank.service",
        "gb10-warm-agent-replica.service",
        "gb10-warm-agent-tp.service",
        "gb10-warm-agent-mp.service",
    ]
    for result in sim_plans.values():
        services = site["services"][result["topology"]]
        for host, entry in result["nodes"].items():
            assert [u["unit"] for u in entry["units"]] == [s for s in services if s in entry["unit_names"]], host
            watchdogs = [u["watchdog"]["service"] for u in entry["units"] if u["watchdog"]]
            warms = [u["warm"]["service"] for u in entry["units"] if u["warm"]]
            assert [n for n in entry["unit_names"] if n in site["static"]] == watchdogs + warms, host
            for unit in entry["units"]:
                if unit["requires"]:
                    required = next(u for u in entry["units"] if u["unit"] == unit["requires"]["unit"])
                    assert required["container"] == unit["requires"]["container"], host
                    assert entry["units"].index(required) < entry["units"].index(unit), host
    assert sorted(site["static"] + [u for units in site["services"].values() for u in units]) == sorted(
        u for u in site["all"] if not u.endswith((".timer", ".socket"))
    )


def test_retire_phases_cover_every_managed_unit_once_watchdogs_engines_workers_head():
    site = plan_mod.plan(None, {}, {})["units"]
    phases = site["retire_phases"]
    assert sorted(u for phase in phases for u in phase) == sorted(site["all"])
    assert phases == [
        [
            "gb10-watchdog-replica.timer",
            "gb10-watchdog-replica.service",
            "gb10-watchdog-tp.timer",
            "gb10-watchdog-tp.service",
            "gb10-watchdog-ray-worker.timer",
            "gb10-watchdog-ray-worker.service",
            "gb10-watchdog-mp.timer",
            "gb10-watchdog-mp.service",
            "gb10-watchdog-mp-rank.timer",
            "gb10-watchdog-mp-rank.service",
            "gb10-warm-agent-replica.socket",
            "gb10-warm-agent-replica.service",
            "gb10-warm-agent-tp.socket",
            "gb10-warm-agent-tp.service",
            "gb10-warm-agent-mp.socket",
            "gb10-warm-agent-mp.service",
        ],
        # the serving engines, a headless rank with its head (neither outlives the other to see its peer vanish and
        # be restarted by Restart=always), then the Ray workers, the Ray head last
        ["gb10-vllm.service", "gb10-vllm-tp.service", "gb10-vllm-mp.service", "gb10-vllm-mp-rank.service"],
        ["gb10-ray-worker.service"],
        ["gb10-ray-head.service"],
    ]


def test_the_units_are_site_wide_even_when_the_profile_is_refused_and_the_plan_stays_json(sim_plans):
    refused = plan_mod.plan(None, {"a": replicas()}, {})
    assert refused["violations"] and refused["units"] == sim_plans["sim-tp"]["units"]
    for result in sim_plans.values():
        assert json.loads(json.dumps(result)) == result


def test_mp_head_watchdog_restarts_its_engine_alone_and_reads_no_ray(sim_plans):
    # vLLM's own multi-node launch has no Ray to restart with the engine or to read the ranks from
    nodes = sim_plans["sim-tp"]["nodes"]
    [head] = [u["watchdog"] for u in nodes["spark-1"]["units"] if u["watchdog"]]
    assert head["restart"] == ["gb10-vllm-mp.service"] and head["kill"] == ["gb10-vllm-mp"] and head["ray"] is None
    assert all(u["requires"] is None for entry in nodes.values() for u in entry["units"])
    [rank] = [u["watchdog"] for u in nodes["spark-2"]["units"] if u["watchdog"]]
    assert rank["restart"] == ["gb10-vllm-mp-rank.service"] and rank["kill"] == ["gb10-vllm-mp-rank"]
