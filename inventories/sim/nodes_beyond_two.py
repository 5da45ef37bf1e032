#!/usr/bin/env python3
"""Ansible script inventory: the simulation's nodes beyond the two of hosts.yml (spark-3 .. spark-N).

`make sim SIM_NODES=N` starts N nodes (sim/up.sh: spark-i at <subnet>.(10+i)); this adds the third and later ones
to gb10_nodes as replicas with the same stated figures as spark-2, so site.yml serves N replicas behind the proxy.
They join neither the tensor-parallel group (the sim model's 4 heads split over 2 ranks, not 3) nor gb10_proxy.
With SIM_NODES unset or 2 it adds nothing.
"""

from __future__ import annotations

import json
import os
import sys


def inventory(count, prefix):
    hosts = [f"spark-{i}" for i in range(3, count + 1)]
    hostvars = {
        host: {
            "ansible_host": f"{prefix}-{host}",
            "gb10_fabric_address": f"{{{{ gb10_sim_subnet_base }}}}.{10 + i}",
            "gb10_stated_facts": {
                "mem_total_mib": 124608,
                "mem_available_mib": 121900,
                "cores": 20,
                "interfaces": {"eth0": f"{{{{ gb10_sim_subnet_base }}}}.{10 + i}/24"},
            },
            "memory_guard_other_work_reserve_gib": 1,
        }
        for i, host in zip(range(3, count + 1), hosts, strict=True)
    }
    return {"gb10_nodes": {"hosts": hosts}, "_meta": {"hostvars": hostvars}}


def main(argv):
    count = int(os.environ.get("SIM_NODES") or 2)
    prefix = os.environ.get("SIM_PREFIX") or "gb10-sim"
    data = inventory(count, prefix)
    if len(argv) > 1 and argv[1] == "--host":
        print(json.dumps(data["_meta"]["hostvars"].get(argv[2], {})))
    else:
        print(json.dumps(data))


if __name__ == "__main__":
    main(sys.argv)
