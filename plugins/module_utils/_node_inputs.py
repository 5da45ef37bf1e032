# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Per-node inputs of the serving plan, from a host's variables: stated figures, measured figures, or both.

Pure Python over plain dicts (a host's vars as Ansible hands them over), so it is tested without Ansible.
Each figure says where it came from: ``inventory`` (``gb10_stated_facts``), ``measured`` (``setup`` facts
gathered this run), or ``inventory (preferred over measured)`` when a measured figure exists but the host says
``gb10_node_figures_prefer: stated`` (a host whose own view is not the machine's: a container standing for a
GB10, a VM with ballooned memory).
"""

from __future__ import annotations

FIGURES = ("mem_total_mib", "mem_available_mib", "cores", "interfaces")
PREFER = ("measured", "stated")
DEFAULT_HF_CACHE = "/var/lib/gb10/hf-cache"


def measured_from_setup(ansible_facts):
    """The plan's figures from ``ansible.builtin.setup`` facts (subsets min, hardware, network); {} if none.

    MemAvailable is not a setup fact; ``memory_mb.nocache.free`` (free + buffers + cache) is its nearest figure.
    """
    facts = ansible_facts or {}
    measured = {}
    if facts.get("memtotal_mb"):
        measured["mem_total_mib"] = int(facts["memtotal_mb"])
    nocache = ((facts.get("memory_mb") or {}).get("nocache") or {}).get("free")
    if nocache:
        measured["mem_available_mib"] = int(nocache)
    cores = facts.get("processor_nproc") or facts.get("processor_vcpus")
    if cores:
        measured["cores"] = int(cores)
    names = facts.get("interfaces")
    if names:
        interfaces = {}
        for name in names:
            ipv4 = (facts.get(name.replace("-", "_")) or {}).get("ipv4") or {}
            if ipv4.get("address"):
                interfaces[name] = "{}/{}".format(ipv4["address"], ipv4.get("prefix", "32"))
        if interfaces:
            measured["interfaces"] = interfaces
    return measured


def merge_figures(stated, measured, prefer="measured"):
    """(figures, sources, measured_values): a measured figure wins unless ``prefer`` is ``stated``."""
    if prefer not in PREFER:
        raise ValueError(f"gb10_node_figures_prefer is {prefer!r}: give one of {', '.join(PREFER)}")
    keep_stated = prefer == "stated"
    stated = stated or {}
    measured = measured or {}
    figures, sources = {}, {}
    for key in FIGURES:
        have_stated = stated.get(key) not in (None, "", {})
        have_measured = measured.get(key) not in (None, "", {})
        if have_measured and not (keep_stated and have_stated):
            figures[key], sources[key] = measured[key], "measured"
        elif have_stated:
            figures[key] = stated[key]
            sources[key] = "inventory (preferred over measured)" if (keep_stated and have_measured) else "inventory"
        else:
            sources[key] = "missing"
    return figures, sources, {k: measured[k] for k in FIGURES if k in measured}


def node_input(hostvars, use_measured=False):
    """The plan's input for one node from its host variables."""
    measured = measured_from_setup(hostvars.get("ansible_facts")) if use_measured else {}
    figures, sources, measured_values = merge_figures(
        hostvars.get("gb10_stated_facts"), measured, prefer=hostvars.get("gb10_node_figures_prefer") or "measured"
    )
    return {
        "fabric_interface": hostvars.get("gb10_fabric_interface"),
        "fabric_address": hostvars.get("gb10_fabric_address"),
        "facts": figures,
        "facts_source": sources,
        "facts_measured": measured_values,
        "other_work_reserve_gib": hostvars.get("memory_guard_other_work_reserve_gib", 0),
        "snapshot_path": hostvars.get("model_weights_snapshot_path"),
        "hf_cache_dir": hostvars.get("gb10_hf_cache_dir") or DEFAULT_HF_CACHE,
    }
