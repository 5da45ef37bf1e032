#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Module gb10.serving.oom_protection: whether each protected unit's main process runs at the protected score."""

from __future__ import annotations

DOCUMENTATION = r"""
module: oom_protection
short_description: Read from the kernel whether each protected unit's main process runs at OOMScoreAdjust=-1000
description:
  - For each unit of O(units), reads its main process (C(systemctl show -p MainPID)) and that process's
    C(/proc/<pid>/oom_score_adj), and reads PID 1's capability bounding set (C(/proc/1/status)) once, all in one
    module run, where a unit read, PID 1's status and each score would take one each.
  - Judges each unit as the memory_guard role requires (seed 004, a starved node lost sshd), applied where the kernel
    shows -1000; else not applied, with why (no main process, a node without CAP_SYS_RESOURCE that refuses a
    negative score while systemd starts the unit all the same, or a drop-in that did not reach this run) and, where
    O(required), the fix.
options:
  units:
    description: The systemd units whose main processes must run protected.
    type: list
    elements: str
    required: true
  node:
    description: The node's name, for the messages.
    type: str
    required: true
  required:
    description: Whether a unit not protected fails the node (memory_guard_oom_protect_required); else it is accepted
      and said.
    type: bool
    default: true
extends_documentation_fragment:
  - gb10.serving.read_only
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Read each protected unit's score from the kernel
  gb10.serving.oom_protection:
    units: [ssh.service]
    node: "{{ inventory_hostname }}"
    required: true
  register: protection
"""

RETURN = r"""
verdicts:
  description: One per unit, in the order given.
  type: list
  elements: dict
  returned: always
  contains:
    unit:
      description: The unit.
      type: str
    main_pid:
      description: Its main process (0 where it does not run).
      type: int
    applied:
      description: Whether the kernel shows its main process at -1000.
      type: bool
    ok:
      description: Whether the node passes (applied, or not required).
      type: bool
    score:
      description: The main process's oom_score_adj (null where there is none).
      type: int
    msg:
      description: The verdict for the operator, with the fix where one is needed.
      type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils._earlyoom import oom_protection_verdict


def _text(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError:
        return ""  # the process ended between the two reads: no score, which the verdict names


def run(module):
    params = module.params
    systemctl = module.get_bin_path("systemctl", required=True)
    pid1_status = _text("/proc/1/status")
    verdicts = []
    for unit in params["units"]:
        rc, out, err = module.run_command([systemctl, "show", "--property=MainPID", "--value", unit])
        if rc != 0:
            module.fail_json(msg=f"{params['node']}: systemctl show {unit} failed (rc={rc}): {err.strip()}")
        pid = int(out.strip() or 0)
        score_text = _text(f"/proc/{pid}/oom_score_adj") if pid > 0 else ""
        verdict = oom_protection_verdict(params["node"], unit, pid, score_text, pid1_status, params["required"])
        verdicts.append({"unit": unit, "main_pid": pid, **verdict})
    return {"changed": False, "verdicts": verdicts}


def main():
    module = AnsibleModule(
        argument_spec={
            "units": {"type": "list", "elements": "str", "required": True},
            "node": {"type": "str", "required": True},
            "required": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    module.exit_json(**run(module))


if __name__ == "__main__":
    main()
