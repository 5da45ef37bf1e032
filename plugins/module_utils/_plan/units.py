# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The systemd units of each plan role, and the site-wide facts about them (issue 15 item 2).

The serving role writes, starts, restarts and retires exactly what this says, and switch_topology reads the same
to tell which topology a node runs now: the table is stated once, here, and nowhere else (DESIGN section 5).
"""

from __future__ import annotations

# plan role -> its service units in start order: (unit, template, container); the Ray head starts before the vLLM
# that joins its cluster (the vLLM unit Requires= the head).
_SERVICES = {
    "replica": (("gb10-vllm.service", "gb10-vllm.service.j2", "gb10-vllm"),),
    "ray_head": (
        ("gb10-ray-head.service", "gb10-ray.service.j2", "gb10-ray-head"),
        ("gb10-vllm-tp.service", "gb10-vllm-tp.service.j2", "gb10-vllm-tp"),
    ),
    "ray_worker": (("gb10-ray-worker.service", "gb10-ray.service.j2", "gb10-ray-worker"),),
    # vLLM's own multi-node launch: one engine container per rank, the head's serves the API.
    "tp_head": (("gb10-vllm-mp.service", "gb10-vllm-mp.service.j2", "gb10-vllm-mp"),),
    "tp_rank": (("gb10-vllm-mp-rank.service", "gb10-vllm-mp.service.j2", "gb10-vllm-mp-rank"),),
}
# unit -> the unit it Requires= and starts after, in whose container's PID namespace it runs (the tensor-parallel
# vLLM joins the Ray head's cluster).
_REQUIRES = {"gb10-vllm-tp.service": "gb10-ray-head.service"}
# plan role -> the unit whose engine answers /health and one completion; a Ray worker serves no API.
_ENGINES = {"replica": "gb10-vllm.service", "ray_head": "gb10-vllm-tp.service", "tp_head": "gb10-vllm-mp.service"}
# plan role -> its Ray unit (tensor-parallel): the head's watchdog reads the group's alive ranks in its container.
_RAY = {"ray_head": "gb10-ray-head.service", "ray_worker": "gb10-ray-worker.service"}
# plan role -> (the unit its watchdog watches, the watchdog's name, the units a decided restart restarts in start
# order). A tensor-parallel group is restarted whole (issue 19 item 4): a vLLM restarted alone on a Ray head whose
# GCS restarted, or beside a rank whose raylet no cluster knows, waits for a placement group that never comes. So
# the head's watchdog restarts the head's Ray and the engine together; Ray keeps no cluster state across a GCS
# restart (no GCS fault tolerance without Redis), so every worker must rejoin the new head, and each worker's
# watchdog restarts its own Ray when the head's GCS does not hold its raylet alive (a raylet that outlives its GCS
# does not reliably exit: ray-project/ray#33955, #33854).
_WATCHED = {
    "replica": ("gb10-vllm.service", "replica", ("gb10-vllm.service",)),
    "ray_head": ("gb10-vllm-tp.service", "tp", ("gb10-ray-head.service", "gb10-vllm-tp.service")),
    "ray_worker": ("gb10-ray-worker.service", "ray-worker", ("gb10-ray-worker.service",)),
    # vLLM's own launch: the head's watchdog probes a generation and restarts the head's engine; a headless rank's
    # watchdog probes the head's /health and restarts its rank once the head stops answering past the start grace
    # (a rank never stays running against a dead or restarted head).
    "tp_head": ("gb10-vllm-mp.service", "mp", ("gb10-vllm-mp.service",)),
    "tp_rank": ("gb10-vllm-mp-rank.service", "mp-rank", ("gb10-vllm-mp-rank.service",)),
}
# The unit sets: a node runs one, and each set's services Conflicts= with every other set's (one GPU per node).
UNIT_SETS = {"replicas": ("replica",), "tp_ray": ("ray_head", "ray_worker"), "tp_mp": ("tp_head", "tp_rank")}
TOPOLOGY_ROLES = {"replicas": ("replica",), "tensor_parallel": ("ray_head", "ray_worker", "tp_head", "tp_rank")}
# Where an engine's warm marker lives: written after its warm-up request (roles/serving's warm-up, its watchdog),
# removed when its unit starts or stops; the node's warm agent answers HAProxy's agent check "up" only while it is
# there (issue 19 item 5). Under /run: a reboot leaves no engine warm.
WARM_DIR = "/run/gb10-warm"
ROLES = tuple(role for roles in TOPOLOGY_ROLES.values() for role in roles)


def _unit_set(role):
    return next(name for name, roles in UNIT_SETS.items() if role in roles)


def _containers():
    return {u: container for services in _SERVICES.values() for u, _template, container in services}


# What a rank that serves no API probes: a Ray worker its raylet in the head's GCS; a headless rank of vLLM's own
# launch the head's /health over the fabric (a rank whose head is down or restarted belongs to no group).
_RANK_PROBES = {"ray_worker": "raylet", "tp_rank": "head"}


def _watchdog(role):
    """The watchdog of ``role``: the unit it watches; its ``probe``, ``engine`` (/health and one completion),
    ``raylet`` (the node's Ray agent asked whether the GCS holds this raylet alive, a Ray worker's) or ``head`` (the
    group head's /health, a headless rank's); ``ray``, the
    container of the head's Ray, where the head's watchdog reads which ranks are alive after a failed probe (None
    elsewhere); ``restart``, the units a decided restart restarts, in start order; ``kill``, their containers,
    killed first, the engine before the Ray it runs in."""
    if role not in _WATCHED:
        return None
    unit, name, restart = _WATCHED[role]
    containers = _containers()
    engine = unit == _ENGINES.get(role)
    return {
        "name": name,
        "timer": f"gb10-watchdog-{name}.timer",
        "service": f"gb10-watchdog-{name}.service",
        "unit": unit,
        "probe": "engine" if engine else _RANK_PROBES[role],
        "ray": containers[_RAY[role]] if engine and role in _RAY else None,
        "restart": list(restart),
        "kill": [containers[u] for u in reversed(restart)],
    }


def _warm(role):
    """The warm agent of an engine's role: its socket and service units and the marker it answers from."""
    if role not in _ENGINES:
        return None
    _unit, name, _restart = _WATCHED[role]
    return {
        "socket": f"gb10-warm-agent-{name}.socket",
        "service": f"gb10-warm-agent-{name}.service",
        "marker": f"{WARM_DIR}/{name}",
    }


def _services(topology, table=None):
    """The service units of ``topology`` (each runs a container), in start order, role by role."""
    table = table or TOPOLOGY_ROLES
    return [unit for role in table[topology] for unit, _template, _container in _SERVICES[role]]


def _conflicts(role):
    # Conflicts= names every other unit set's service units (the other topology's, and in tensor-parallel the
    # other launcher's): starting one stops them on this node. A watchdog is not among them: its timer is retired
    # with its set (disable --now) and starts nothing stopped.
    own = _unit_set(role)
    return sorted(unit for name in UNIT_SETS if name != own for unit in _services(name, UNIT_SETS))


def _requires(unit):
    required = _REQUIRES.get(unit)
    return {"unit": required, "container": _containers()[required]} if required else None


def node_units(role):
    """A node's units: ``units`` in start order (unit, template, container, conflicts, requires, watchdog, warm),
    the ``engine_unit`` that answers /health (None on a Ray worker), and ``unit_names``, every unit file its role
    writes in the order they stop (watchdog timer, its service, the warm agent's socket and service, then the
    services in reverse start order). ``requires`` is the unit (and its container) that this one Requires=, starts
    after and shares the PID namespace of, or None. ``warm`` is on the engine unit only: its warm agent.
    """
    watchdog = _watchdog(role)
    warm = _warm(role)
    units = [
        {
            "unit": unit,
            "template": template,
            "container": container,
            "conflicts": _conflicts(role),
            "requires": _requires(unit),
            "watchdog": dict(watchdog, container=container) if watchdog and watchdog["unit"] == unit else None,
            "warm": warm if unit == _ENGINES.get(role) else None,
        }
        for unit, template, container in _SERVICES[role]
    ]
    names = [watchdog["timer"], watchdog["service"]] if watchdog else []
    names += [warm["socket"], warm["service"]] if warm else []
    names += [unit["unit"] for unit in reversed(units)]
    return {"units": units, "engine_unit": _ENGINES.get(role), "unit_names": names}


def site_units():
    """What is site-wide: ``all``, every unit the collection manages (a node retires those its role does not
    write); ``topologies``, the units each topology runs (what a switch reads to tell which one runs now);
    ``services``, each topology's service units, those that run a container, in start order (what the other
    topology's units name in Conflicts=, what Ray's fence loads before); ``static``, the units with no [Install]
    (a watchdog's service, which its timer starts, and a warm agent's, which its socket starts: nothing to enable
    or disable); ``agents``, the warm agents' units (they hold no memory: a FlashInfer build leaves them running);
    and ``retire_phases``: every node does one phase before any does the next (watchdogs, which would
    restart an engine, and warm agents; the engines; the Ray workers; the Ray head), so that nothing still running
    sees a peer vanish."""
    per_role = {role: node_units(role) for role in ROLES}

    def services(role):
        return [unit["unit"] for unit in per_role[role]["units"]]

    watchdogs = [unit["watchdog"] for role in ROLES for unit in per_role[role]["units"] if unit["watchdog"]]
    warms = [unit["warm"] for role in ROLES for unit in per_role[role]["units"] if unit["warm"]]
    engines = [per_role[role]["engine_unit"] for role in ROLES if per_role[role]["engine_unit"]]
    phases = [
        [name for watchdog in watchdogs for name in (watchdog["timer"], watchdog["service"])]
        + [name for warm in warms for name in (warm["socket"], warm["service"])],
        # a headless rank stops with its head, in one phase: neither outlives the other to see its peer vanish
        engines + services("tp_rank"),
        services("ray_worker"),
        [unit for unit in services("ray_head") if unit not in engines],
    ]
    return {
        "all": list(dict.fromkeys(name for role in ROLES for name in per_role[role]["unit_names"])),
        "topologies": {
            topology: [name for role in roles for name in per_role[role]["unit_names"]]
            for topology, roles in TOPOLOGY_ROLES.items()
        },
        "services": {topology: _services(topology) for topology in TOPOLOGY_ROLES},
        "static": [watchdog["service"] for watchdog in watchdogs] + [warm["service"] for warm in warms],
        "agents": [name for warm in warms for name in (warm["socket"], warm["service"])],
        "retire_phases": phases,
    }
