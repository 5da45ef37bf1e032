#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Module gb10.serving.engine_memory_admission: admit an engine start by the node's MemAvailable (issue 39 item 2)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: engine_memory_admission
short_description: Admit an engine start by the node's MemAvailable against the plan's need, or refuse it
description:
  - Reads /proc/meminfo's MemAvailable (never MemFree) right before the collection starts an engine and holds it to
    the plan's need on this node, vLLM budget + the engine's /dev/shm + other work's reserve + the plan's margin.
  - Short of it, fails with the node, the numbers and the processes that hold the most resident memory.
  - With O(drop_caches), first writes C(3) to /proc/sys/vm/drop_caches (after sync), so the page cache does not
    stand between the load and the memory (the node must allow it; a container's read-only /proc/sys does not).
options:
  node:
    description: The node's inventory name, for the message.
    type: str
    required: true
  table:
    description:
      - The plan's memory table of this node (budget_gib, shm_gib, other_work_reserve_gib, margin_gib and the need,
        start_need_gib). The engine container's /dev/shm is the plan's (shm_gib).
    type: dict
    required: true
  shm_size:
    description:
      - The engine container's /dev/shm size (Docker's --shm-size, such as 8g), counted only where O(table) holds
        no shm_gib (a table of a plan before the plan stated the size).
    type: str
    default: '0'
  stated_available_mib:
    description:
      - MemAvailable as the inventory states it, for a node whose own view is not the machine's
        (gb10_node_figures_prefer stated, such as a container standing for a GB10); the measured figure is still
        returned.
    type: int
  drop_caches:
    description: Drop the page cache (sync, then 3 to /proc/sys/vm/drop_caches) before measuring.
    type: bool
    default: false
  top:
    description: How many of the largest processes to name when the start is refused.
    type: int
    default: 5
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: In check mode the page cache is not dropped (changed says it would be); the measurement is made.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
    details: Dropping the page cache has no before and after to show.
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Admit the engine's start
  gb10.serving.engine_memory_admission:
    node: "{{ inventory_hostname }}"
    table: "{{ gb10_node_plan.memory }}"
"""

RETURN = r"""
admitted:
  description: Whether the start fits.
  type: bool
  returned: always
available_mib:
  description: The MemAvailable judged (stated where given), MiB.
  type: float
  returned: always
measured_available_mib:
  description: The node's own MemAvailable, MiB.
  type: float
  returned: always
need_mib:
  description: The plan's need on this node, MiB.
  type: float
  returned: always
parts:
  description: The need's parts (budget_mib, shm_mib, other_work_reserve_mib, margin_mib).
  type: dict
  returned: always
top:
  description: The processes with the most resident memory (pid, name, rss_mib).
  type: list
  elements: dict
  returned: always
message:
  description: The arithmetic, and on a refusal what holds the memory and the fix.
  type: str
  returned: always
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils import _admission as admission

DROP_CACHES = "/proc/sys/vm/drop_caches"


def main():
    module = AnsibleModule(
        argument_spec={
            "node": {"type": "str", "required": True},
            "table": {"type": "dict", "required": True},
            "shm_size": {"type": "str", "default": "0"},
            "stated_available_mib": {"type": "int"},
            "drop_caches": {"type": "bool", "default": False},
            "top": {"type": "int", "default": 5},
        },
        supports_check_mode=True,
    )
    params = module.params
    try:
        shm_mib = admission.parse_size_mib(params["shm_size"])
    except ValueError as exc:
        module.fail_json(msg=f"{params['node']}: shm_size {exc}")
    changed = False
    if params["drop_caches"]:
        changed = True
        if not module.check_mode:
            os.sync()
            try:
                with open(DROP_CACHES, "w", encoding="ascii") as handle:
                    handle.write("3\n")
            except OSError as exc:
                module.fail_json(
                    msg=f"{params['node']}: cannot drop the page cache ({DROP_CACHES}: {exc}); where /proc/sys is "
                    "read-only (a container), set serving_drop_caches: false in the inventory"
                )
    with open("/proc/meminfo", encoding="ascii") as handle:
        figures, measured, source = admission.judged(handle.read(), params["stated_available_mib"])
    top = admission.top_consumers(admission.read_processes(), params["top"])
    result = admission.verdict(params["node"], figures, params["table"], shm_mib, top, source)
    result.update(changed=changed, measured_available_mib=measured, top=top)
    if not result["admitted"]:
        module.fail_json(msg=result["message"], **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
