#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Hold (or release) a whole package set in one dpkg call; the decision is module_utils._lockstep.holds.hold_changes."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: package_holds
short_description: Hold or release a set of Debian packages with one dpkg call
version_added: 0.1.0
description:
  - Reads the selections of every package in O(names) with one C(dpkg-query) call and sets the ones that differ with
    one C(dpkg --set-selections) call, then reads them back.
  - C(ansible.builtin.dpkg_selections) takes one package per call, so a looped hold of a set of twelve costs twelve
    module runs on every converge; this module costs one.
  - A name dpkg does not know, or whose package is not on disk, fails the module before anything is set (dpkg itself
    would only warn and leave that package unheld).
author:
  - gb10.serving maintainers (!UNKNOWN)
options:
  names:
    description: The packages to hold or release.
    type: list
    elements: str
    required: true
  held:
    description: V(true) marks each package C(hold), V(false) marks it C(install) (what C(apt-mark unhold) does).
    type: bool
    default: true
  admindir:
    description: dpkg's database directory (C(dpkg --admindir)).
    type: path
    default: /var/lib/dpkg
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details:
      - In check mode the selections are read and the packages that would change are returned, nothing is set.
      - In check mode a package dpkg does not know yet (its install before this task was simulated) counts as one
        that would be held, with a warning; outside check mode it fails.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: full
    details: The selections of the changed packages before and after, one C(name selection) line each.
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: debian
notes:
  - Needs C(dpkg) and C(dpkg-query) on the node, and root to set selections.
"""

EXAMPLES = r"""
- name: Hold every package of the set
  gb10.serving.package_holds:
    names:
      - linux-image-6.17.0-1014-nvidia
      - linux-modules-nvidia-580-open-6.17.0-1014-nvidia
      - nvidia-driver-580-open

- name: Release them again
  gb10.serving.package_holds:
    names: [nvidia-driver-580-open]
    held: false
"""

RETURN = r"""
changed_packages:
  description: The packages whose selection was set (or, in check mode, would be), in O(names) order.
  returned: always
  type: list
  elements: str
  sample: [nvidia-driver-580-open]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils._lockstep.holds import hold_changes
from ansible_collections.gb10.serving.plugins.module_utils._lockstep.parse import DPKG_QUERY_FORMAT, parse_dpkg_query


def read_selections(module, names):
    """dpkg's record of ``names``; dpkg-query exits 1 when one is unknown, which hold_changes reports by name."""
    admindir = module.params["admindir"]
    rc, out, err = module.run_command(["dpkg-query", f"--admindir={admindir}", "-W", "-f=" + DPKG_QUERY_FORMAT, *names])
    if rc not in (0, 1):
        module.fail_json(msg=f"dpkg-query -W failed on this node (rc {rc}): {err.strip()}")
    return parse_dpkg_query(out)


def main():
    module = AnsibleModule(
        argument_spec={
            "names": {"type": "list", "elements": "str", "required": True},
            "held": {"type": "bool", "default": True},
            "admindir": {"type": "path", "default": "/var/lib/dpkg"},
        },
        supports_check_mode=True,
    )
    names = module.params["names"]
    unknown, changes = hold_changes(read_selections(module, names), names, module.params["held"])
    if unknown and module.check_mode and module.params["held"]:
        # Check mode: the install before this task (apt, simulated) has not put these on the node yet, so a real run
        # would hold them: a predicted change, not a failure (check mode's false failure on a new driver set).
        module.warn(f"check mode: {', '.join(unknown)} not installed yet; a real run installs, then holds them")
        changes = sorted(
            changes + [(name, "(not installed)", "hold") for name in unknown], key=lambda change: names.index(change[0])
        )
        unknown = []
    if unknown:
        verb = "hold" if module.params["held"] else "release"
        module.fail_json(
            msg=f"dpkg has no installed package {', '.join(unknown)} to {verb}: install it first (a selection set on"
            " a name dpkg does not know is dropped with a warning).",
            unknown=unknown,
        )
    result = {"changed": bool(changes), "changed_packages": [name for name, _before, _after in changes]}
    if module._diff and changes:
        result["diff"] = {
            "before": "".join(f"{name} {before}\n" for name, before, _after in changes),
            "after": "".join(f"{name} {after}\n" for name, _before, after in changes),
        }
    if changes and not module.check_mode:
        selections = "".join(f"{name} {after}\n" for name, _before, after in changes)
        admindir = module.params["admindir"]
        rc, _out, err = module.run_command(["dpkg", f"--admindir={admindir}", "--set-selections"], data=selections)
        if rc != 0:
            module.fail_json(msg=f"dpkg --set-selections failed on this node (rc {rc}): {err.strip()}", **result)
        _unknown, left = hold_changes(read_selections(module, names), names, module.params["held"])
        if left:
            module.fail_json(
                msg=f"dpkg --set-selections left {', '.join(name for name, _b, _a in left)} unchanged: {err.strip()}",
                **result,
            )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
