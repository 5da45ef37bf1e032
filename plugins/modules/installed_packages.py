#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Every package dpkg holds installed on the node, name and version, in one dpkg-query call (module_utils._lockstep)."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: installed_packages
short_description: Read every installed Debian package of a node and its version in one dpkg-query call
version_added: 0.1.0
description:
  - Lists every package dpkg knows (C(dpkg-query -W)) and returns the installed ones with their versions (epoch
    included where a package has one), for a role to skip an C(ansible.builtin.apt) task whose packages are all
    there, or to compare a set with its pins.
  - Returns a plain result to register, never facts. ansible-core deep-copies every fact of a host into each task's
    variables (C(namespace_facts) in C(ansible/vars/clean.py)), so every package of a node held as facts (what
    C(ansible.builtin.package_facts) returns) is copied again at every task of the run, for every node; a registered
    result is not. It also needs no C(python3-apt), which C(package_facts) with C(manager=apt) does, and reads
    faster than python-apt's cache opens (docs/converge-cost.md).
  - Reads only; changes nothing.
extends_documentation_fragment:
  - gb10.serving.read_only
author:
  - gb10.serving maintainers (!UNKNOWN)
options:
  admindir:
    description: dpkg's database directory (C(dpkg-query --admindir)).
    type: path
    default: /var/lib/dpkg
attributes:
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: debian
notes:
  - Needs C(dpkg-query) on the node (every Debian and Ubuntu has it).
"""

EXAMPLES = r"""
- name: Read the packages this node holds (once a run)
  gb10.serving.installed_packages:
  register: __gb10_installed_packages

- name: Install earlyoom unless it is there
  ansible.builtin.apt:
    name: earlyoom
  when: "'earlyoom' not in __gb10_installed_packages.packages"
"""

RETURN = r"""
packages:
  description:
    - Every installed package (dpkg's state C(installed), C(triggers-pending) or C(triggers-awaited)) and its version,
      the architecture qualifier of a multi-arch name left out. A package dpkg only remembers (removed, its
      configuration kept) or left half-installed is not in it.
  returned: always
  type: dict
  sample: {"earlyoom": "1.7-1", "nvidia-driver-580-open": "580.95.05-0ubuntu1", "gnupg": "2.2.40-1.1"}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils._lockstep.parse import DPKG_QUERY_FORMAT, parse_dpkg_query


def main():
    module = AnsibleModule(
        argument_spec={"admindir": {"type": "path", "default": "/var/lib/dpkg"}}, supports_check_mode=True
    )
    admindir = module.params["admindir"]
    rc, out, err = module.run_command(["dpkg-query", f"--admindir={admindir}", "-W", "-f=" + DPKG_QUERY_FORMAT])
    if rc != 0:
        module.fail_json(msg=f"dpkg-query -W failed on this node (rc {rc}): {err.strip()}")
    packages = {name: entry["version"] for name, entry in parse_dpkg_query(out).items() if entry["on_disk"]}
    module.exit_json(changed=False, packages=packages)


if __name__ == "__main__":
    main()
