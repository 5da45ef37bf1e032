#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Ansible face of plugins/module_utils/_lockstep/: gather on the node, decide in module_utils."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: lockstep_state
short_description: Report whether the running and the next-boot kernel have the NVIDIA kernel module
version_added: 0.1.0
description:
  - Reads the dpkg database, the C(Depends) of the modules and kernel metapackages, and the C(nvidia.ko*) files
    under C(/lib/modules/<release>) of every kernel, and returns the lockstep state of the node.
  - "The verdict is C(covered) (the running kernel has C(nvidia.ko) and the next boot takes it again),
    C(pending-reboot) (the next boot takes a different kernel that has C(nvidia.ko): upgraded, not yet rebooted;
    emitted as a warning) or C(exposed) (the next boot takes a kernel without C(nvidia.ko); the result names the
    package to install)."
  - The next-boot kernel is the highest installed C(linux-image-<release>) in Debian version order, which is the one
    DGX Spark boots.
  - Direction-aware on purpose (seed 004) - it compares kernels with what is on disk, never only the two
    metapackages with each other.
  - The module only reads; it never fails because of the verdict. The role decides what to do with it.
extends_documentation_fragment:
  - gb10.serving.read_only
author:
  - gb10.serving maintainers (!UNKNOWN)
options:
  running_kernel:
    description:
      - The running kernel release (what C(uname -r) prints).
      - Defaults to the kernel this module runs under. Inside a container that is the B(host's) kernel, not the
        node's, so a simulation or test passes the release it wants to stand for.
    type: str
  driver_branch:
    description: NVIDIA driver branch whose prebuilt modules are expected, as in C(linux-modules-nvidia-580-open-...).
    type: str
    default: "580"
  driver_variant:
    description:
      - Variant infix of the modules packages (C(open), C(server-open), C(server)); empty for the proprietary
        modules.
    type: str
    default: open
  meta_flavour:
    description: Flavour suffix of the metapackages, as in C(linux-image-nvidia-hwe-24.04).
    type: str
    default: nvidia-hwe-24.04
  packages:
    description: Package names whose installed version and hold state are returned in RV(packages).
    type: list
    elements: str
    default: []
  modules_root:
    description: Directory holding one subdirectory per kernel release.
    type: path
    default: /lib/modules
  node_name:
    description: How messages name the node (the inventory name); defaults to the node's host name.
    type: str
attributes:
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: debian
notes:
  - Needs C(dpkg-query) on the node.
"""

EXAMPLES = r"""
- name: Read the lockstep state
  gb10.serving.lockstep_state:
  register: __lockstep

- name: In a container (molecule, the simulation) say which kernel the node stands for
  gb10.serving.lockstep_state:
    running_kernel: 6.17.0-1014-nvidia
    packages:
      - nvidia-driver-580-open
      - linux-modules-nvidia-580-open-nvidia-hwe-24.04
  register: __lockstep

- name: Refuse to reboot into a kernel without nvidia.ko
  ansible.builtin.assert:
    that: __lockstep.next_boot_covered
    fail_msg: "{{ __lockstep.message }}"
"""

RETURN = r"""
verdict:
  description: C(covered), C(pending-reboot) or C(exposed).
  returned: always
  type: str
  sample: covered
ok:
  description: False when the verdict is C(exposed).
  returned: always
  type: bool
message:
  description: One sentence for the operator, with the node, the kernels and the fix.
  returned: always
  type: str
running_kernel:
  description: The running kernel release used for the verdict.
  returned: always
  type: str
  sample: 6.17.0-1014-nvidia
running_abi:
  description: The ABI part of the running kernel release.
  returned: always
  type: str
  sample: 6.17.0-1014
running_covered:
  description: Whether C(/lib/modules/<running>) holds C(nvidia.ko*).
  returned: always
  type: bool
next_boot_kernel:
  description: The highest installed kernel, which the next boot takes.
  returned: always
  type: str
next_boot_covered:
  description: Whether C(/lib/modules/<next boot>) holds C(nvidia.ko*).
  returned: always
  type: bool
modules_meta_target:
  description: The kernel release the modules metapackage depends on; null when it is not installed.
  returned: always
  type: str
image_meta_target:
  description: The kernel release the image metapackage depends on; null when it is not installed.
  returned: always
  type: str
installed_kernels:
  description: Installed kernel releases, in Debian version order.
  returned: always
  type: list
  elements: str
covered_kernels:
  description: Kernel releases whose module tree holds C(nvidia.ko*).
  returned: always
  type: list
  elements: str
nvidia_modules:
  description: The C(nvidia.ko*) paths found per kernel release, relative to the release's module directory.
  returned: always
  type: dict
missing_package:
  description: The package that would cover the exposed kernel; null unless the verdict is C(exposed).
  returned: always
  type: str
  sample: linux-modules-nvidia-580-open-6.17.0-1018-nvidia
warnings_found:
  description: Lockstep anomalies that do not decide the verdict (metapackages out of step, pinpoint kernel).
  returned: always
  type: list
  elements: str
packages:
  description: For each name in O(packages), its installed version (empty when absent) and whether it is held.
  returned: always
  type: dict
  sample:
    nvidia-driver-580-open:
      version: 580.142-0ubuntu0.24.04.1
      held: true
      installed: true
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils._lockstep.naming import (
    image_metapackage_name,
    modules_metapackage_name,
)
from ansible_collections.gb10.serving.plugins.module_utils._lockstep.parse import (
    DPKG_QUERY_FORMAT,
    parse_dpkg_query,
    parse_lib_modules,
)
from ansible_collections.gb10.serving.plugins.module_utils._lockstep.verdict import (
    VERDICT_PENDING_REBOOT,
    lockstep_verdict,
)

DEPENDS_FORMAT = "${Package}\t${Depends}\n"


class LockstepState:
    """Gathers the inputs on the node; every decision is made by module_utils._lockstep."""

    def __init__(self, module):
        self.module = module
        self.params = module.params

    def dpkg_packages(self):
        rc, out, err = self.module.run_command(["dpkg-query", "-W", "-f=" + DPKG_QUERY_FORMAT])
        if rc != 0:
            self.module.fail_json(msg=f"dpkg-query -W failed on this node (rc {rc}): {err.strip()}")
        return parse_dpkg_query(out)

    def depends(self, names):
        """Depends of the installed ones among ``names``; dpkg-query exits 1 when one is unknown, which is fine."""
        _rc, out, _err = self.module.run_command(["dpkg-query", "-W", "-f=" + DEPENDS_FORMAT, *list(names)])
        found = {}
        for line in out.splitlines():
            name, _sep, depends = line.partition("\t")
            found[name.split(":", 1)[0]] = depends
        return found

    def module_files(self):
        root = self.params["modules_root"]
        try:
            listing = "\n".join(os.listdir(root))
        except OSError:
            listing = ""
        result = {}
        for release in parse_lib_modules(listing):
            base = os.path.join(root, release)
            files = []
            for top in ("updates", "extra", "kernel"):
                top_dir = os.path.join(base, top)
                if not os.path.isdir(top_dir):
                    continue
                for dirpath, dirnames, filenames in os.walk(top_dir):
                    if dirpath == os.path.join(base, "kernel"):
                        # Only kernel/nvidia-* holds NVIDIA's prebuilt modules; skip the in-tree drivers.
                        dirnames[:] = [d for d in dirnames if d.startswith("nvidia")]
                    rel = os.path.relpath(dirpath, base)
                    files.extend(os.path.join(rel, name) for name in filenames if name.startswith("nvidia.ko"))
            result[release] = files
        return result

    def run(self):
        running = self.params["running_kernel"] or os.uname().release
        branch = self.params["driver_branch"]
        variant = self.params["driver_variant"]
        flavour = self.params["meta_flavour"]
        packages = self.dpkg_packages()
        modules_meta = modules_metapackage_name(branch, variant, flavour)
        image_meta = image_metapackage_name(flavour)
        depends = self.depends([name for name in (modules_meta, image_meta) if packages.get(name, {}).get("on_disk")])
        node = self.params["node_name"] or os.uname().nodename
        state = lockstep_verdict(
            running,
            packages,
            self.module_files(),
            modules_meta_depends=depends.get(modules_meta),
            image_meta_depends=depends.get(image_meta),
            branch=branch,
            variant=variant,
            meta_flavour=flavour,
            node=node,
        )
        state["warnings_found"] = state.pop("warnings")
        state["packages"] = {
            name: {
                "version": packages.get(name, {}).get("version", "") if packages.get(name, {}).get("on_disk") else "",
                "held": bool(packages.get(name, {}).get("held")),
                "installed": bool(packages.get(name, {}).get("on_disk")),
            }
            for name in self.params["packages"]
        }
        for warning in state["warnings_found"]:
            self.module.warn(warning)
        if state["verdict"] == VERDICT_PENDING_REBOOT:
            self.module.warn(state["message"])
        self.module.exit_json(changed=False, **state)


def main():
    module = AnsibleModule(
        argument_spec={
            "running_kernel": {"type": "str"},
            "driver_branch": {"type": "str", "default": "580"},
            "driver_variant": {"type": "str", "default": "open"},
            "meta_flavour": {"type": "str", "default": "nvidia-hwe-24.04"},
            "packages": {"type": "list", "elements": "str", "default": []},
            "modules_root": {"type": "path", "default": "/lib/modules"},
            "node_name": {"type": "str"},
        },
        supports_check_mode=True,
    )
    LockstepState(module).run()


if __name__ == "__main__":
    main()
