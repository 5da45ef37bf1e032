#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Read every systemd unit's state and unit file state in one module run; the parsing is module_utils._unit_states."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: unit_states
short_description: Read the state of every systemd unit of a node in one module run
version_added: 0.1.0
description:
  - Lists every unit systemd has loaded (C(systemctl list-units --all)) and every unit file (C(systemctl
    list-unit-files)), two systemctl calls, and returns them as the fact C(gb10_units), with C(gb10_units_up), the
    units active and enabled.
  - Read once a run (roles/gb10 C(tasks_from=units)), a role skips its C(ansible.builtin.systemd_service) enable and
    start of a unit in C(gb10_units_up), which would change nothing; a unit a run may stop (the serving units) is
    read by its own role right before its start, never from this.
  - Reads only; changes nothing.
author:
  - gb10.serving maintainers (!UNKNOWN)
options:
  invocations:
    description:
      - Units whose current run is also read (C(systemctl show --property=InvocationID), a third call); each gets
        C(invocation), which a start or restart changes. roles/serving reads its engine's to tell an engine this
        run started from one it found running.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: It reads the same in check mode.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
  facts:
    description: Action returns an C(ansible_facts) dictionary that will update existing host facts.
    support: full
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
notes:
  - Needs systemd (C(systemctl)) on the node.
"""

EXAMPLES = r"""
- name: Read the node's units (once a run)
  gb10.serving.unit_states:
  when: ansible_facts.gb10_units is not defined

- name: Read whether this node's serving units run now, and the engine's current run
  gb10.serving.unit_states:
    invocations: [gb10-vllm.service]

- name: Enable and start earlyoom
  ansible.builtin.systemd_service:
    name: earlyoom.service
    enabled: true
    state: started
  when: "'earlyoom.service' not in ansible_facts.gb10_units_up | default([])"
"""

RETURN = r"""
ansible_facts:
  description: The node's units.
  returned: success
  type: dict
  contains:
    gb10_units:
      description: Each unit either list names, with C(load), C(active), C(sub) and C(file_state) (empty for a unit
        with no file; a unit systemd has not loaded is C(inactive) and C(dead)); each of O(invocations) also with
        C(invocation), its current run's InvocationID (empty when it has none).
      type: dict
      sample: {"earlyoom.service": {"load": "loaded", "active": "active", "sub": "running", "file_state": "enabled"}}
    gb10_units_up:
      description: The units active whose file is enabled, sorted.
      type: list
      elements: str
      sample: [earlyoom.service, haproxy.service]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils import _unit_states


def _systemctl(module, systemctl, args):
    rc, out, err = module.run_command([systemctl, *args])
    if rc != 0:
        module.fail_json(msg=f"unit_states: systemctl {' '.join(args)} exited {rc}: {err.strip() or out.strip()}")
    return out


def main():
    module = AnsibleModule(
        argument_spec={"invocations": {"type": "list", "elements": "str", "default": []}},
        supports_check_mode=True,
    )
    systemctl = module.get_bin_path("systemctl", required=True)
    asked = module.params["invocations"]
    invocations = (
        _unit_states.parse_invocations(_systemctl(module, systemctl, (*_unit_states.SHOW_INVOCATIONS, *asked)))
        if asked
        else {}
    )
    states = _unit_states.unit_states(
        _unit_states.parse_units(_systemctl(module, systemctl, _unit_states.LIST_UNITS)),
        _unit_states.parse_unit_files(_systemctl(module, systemctl, _unit_states.LIST_UNIT_FILES)),
        invocations,
    )
    module.exit_json(changed=False, ansible_facts={"gb10_units": states, "gb10_units_up": _unit_states.up(states)})


if __name__ == "__main__":
    main()
