#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Module gb10.serving.earlyoom_armed: prove from earlyoom's own log that its current run is armed."""

from __future__ import annotations

DOCUMENTATION = r"""
module: earlyoom_armed
short_description: Check from earlyoom's own startup log that its current run will really fire
description:
  - Reads the journal lines of the B(current) run of the earlyoom unit only, selected by the unit's
    InvocationID, so an earlier run's thresholds cannot answer (seed 004 - reading the journal right after a
    restart returned the previous run's lines).
  - Parses earlyoom 1.7 (C(mem <=), C(swap <=)) and 1.8+ (C(mem avail <=), C(swap free <=)) wording, compares the
    SIGTERM and SIGKILL thresholds with the intended ones, and checks that the swap side cannot block either signal
    at the given vm.swappiness.
  - Waits up to O(timeout) seconds for the startup lines to reach the journal.
options:
  unit:
    description: The earlyoom systemd unit.
    type: str
    default: earlyoom.service
  intended:
    description: Intended thresholds per signal in percent, e.g. SIGTERM mem 4 swap 100, SIGKILL mem 2 swap 100.
    type: dict
    required: true
  swappiness:
    description: The vm.swappiness in force on the node.
    type: int
    required: true
  swap_total_mib:
    description: The node's swap size in MiB.
    type: int
    required: true
  prefer:
    description: The intended --prefer regex, checked against earlyoom's own report of it.
    type: str
  avoid:
    description: The intended --avoid regex, checked against earlyoom's own report of it.
    type: str
  timeout:
    description: Seconds to wait for the startup lines of the current run.
    type: int
    default: 20
extends_documentation_fragment:
  - gb10.serving.read_only
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Prove earlyoom is armed
  gb10.serving.earlyoom_armed:
    intended: "{{ __memory_guard_earlyoom.thresholds }}"
    swappiness: 0
    swap_total_mib: "{{ ansible_facts.swaptotal_mb }}"
"""

RETURN = r"""
armed:
  description: True when the reported thresholds equal the intended ones and no signal is blocked by swap;
    null in check mode where the unit has no run yet.
  type: bool
  returned: always
invocation_id:
  description: The InvocationID of the earlyoom run whose lines were read.
  type: str
  returned: always
reported:
  description: What earlyoom printed, parsed (version, thresholds per signal, prefer and avoid regexes).
  type: dict
  returned: always
problems:
  description: Why it is not armed; empty when armed.
  type: list
  elements: str
  returned: always
lines:
  description: The startup lines read.
  type: list
  elements: str
  returned: always
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils._earlyoom import (
    armed_problems,
    parse_startup,
)


def _current_run_lines(module, unit):
    rc, out, err = module.run_command(["systemctl", "show", "--property=InvocationID", "--value", unit])
    invocation = out.strip()
    if (rc != 0 or not invocation) and module.check_mode:
        # In check mode on a node where the role has not run yet there is no run to read: said, not hidden.
        module.warn(f"check mode: {unit} has no current run, so whether earlyoom is armed is proven by a real run")
        module.exit_json(
            changed=False,
            armed=None,
            invocation_id="",
            reported={},
            problems=[],
            lines=[],
        )
    if rc != 0 or not invocation:
        module.fail_json(msg=f"{unit} has no current run (systemctl show: rc={rc} {err.strip()}): is it started?")
    rc, out, err = module.run_command(
        [
            "journalctl",
            "--no-pager",
            "-o",
            "cat",
            f"_SYSTEMD_INVOCATION_ID={invocation}",
        ]
    )
    if rc != 0:
        module.fail_json(msg=f"journalctl failed for {unit} run {invocation}: {err.strip()}")
    return invocation, [line for line in out.splitlines() if line.strip()]


def run(module):
    params = module.params
    deadline = time.monotonic() + params["timeout"]
    while True:
        invocation, lines = _current_run_lines(module, params["unit"])
        reported = parse_startup(lines)
        if len(reported["thresholds"]) == 2 or time.monotonic() >= deadline:
            break
        time.sleep(1)
    problems = armed_problems(
        reported,
        params["intended"],
        params["swappiness"],
        params["swap_total_mib"],
        prefer=params["prefer"],
        avoid=params["avoid"],
    )
    return {
        "changed": False,
        "armed": not problems,
        "invocation_id": invocation,
        "reported": reported,
        "problems": problems,
        "lines": lines,
    }


def main():
    module = AnsibleModule(
        argument_spec={
            "unit": {"type": "str", "default": "earlyoom.service"},
            "intended": {"type": "dict", "required": True},
            "swappiness": {"type": "int", "required": True},
            "swap_total_mib": {"type": "int", "required": True},
            "prefer": {"type": "str"},
            "avoid": {"type": "str"},
            "timeout": {"type": "int", "default": 20},
        },
        supports_check_mode=True,
    )
    module.exit_json(**run(module))


if __name__ == "__main__":
    main()
