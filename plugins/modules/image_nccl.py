#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Module gb10.serving.image_nccl: the NCCL a serving image's engine loads, read inside the image (issue 39 item 4)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: image_nccl
short_description: Read which NCCL (version and build) a serving image's engine loads
description:
  - Runs the image's own interpreter in a throwaway C(docker run --rm --network none) container and reads the NCCL
    Python distributions (C(nvidia-nccl-cu12), C(nvidia-nccl-cu13), what torch's CUDA wheels load) with
    importlib.metadata, and every C(libnccl.so*) file in the wheels' C(nvidia/nccl/lib) and the system's library
    folders, each with its sha256 (two builds of one version differ there, vllm-project/vllm#41725).
  - The one the engine loads is C(VLLM_NCCL_SO_PATH)'s where the image's environment sets it, else the wheel's, else
    the system's. An image with no NCCL (a CPU build) returns a null version and build.
  - Changes nothing; roles/serving_image records the result per node and refuses a tensor-parallel group whose ranks
    load different builds, or one below the plan's minimum with multi-node CUDA graphs.
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details:
      - It changes nothing on the node but a throwaway C(docker run --rm) container, the same in check mode.
      - In check mode it never pulls (C(docker run --pull never)); an image the node does not hold yet is not read, and
        a warning says that the real run reads it.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
    details: It changes nothing, so there is nothing to diff.
options:
  image:
    description: The image on this node (any reference the local engine resolves).
    type: str
    required: true
  python:
    description: The interpreter inside the image (first on the image's PATH).
    type: str
    default: python3
  docker:
    description: The docker client.
    type: str
    default: docker
  node:
    description: The node's name, for the messages.
    type: str
    default: ""
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Read the NCCL this node's serving image loads
  gb10.serving.image_nccl:
    image: gb10/vllm-serving:5d0c2a8e4b1f7c3a
    node: "{{ inventory_hostname }}"
  register: __nccl
"""

RETURN = r"""
nccl:
  description:
    - The NCCL the engine loads, C(version), C(sha256) and C(library) (null each where the image has none), C(source)
      (C(wheel nvidia-nccl-cu13), C(system library) or C(VLLM_NCCL_SO_PATH ...)), and every C(distributions) and
      C(libraries) found; null in check mode when the node does not hold the image.
  type: dict
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils import _serving_image as si


def main():
    module = AnsibleModule(
        argument_spec=dict(
            image=dict(type="str", required=True),
            python=dict(type="str", default="python3"),
            docker=dict(type="str", default="docker"),
            node=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    p = module.params
    where = f"{p['node']}: " if p["node"] else ""
    if module.check_mode:
        rc, _out, _err = module.run_command([p["docker"], "image", "inspect", p["image"]])
        if rc != 0:
            msg = f"check mode: {p['image']} is not on this node yet: its NCCL is read in the real run"
            module.warn(msg)
            module.exit_json(changed=False, nccl=None, msg=msg)
    argv = [p["docker"], "run", "--rm"] + (["--pull", "never"] if module.check_mode else [])
    argv += ["--network", "none", "--entrypoint", p["python"], p["image"], "-c", si.NCCL_PROBE]
    rc, out, err = module.run_command(argv)
    if rc != 0:
        module.fail_json(msg=f"{where}cannot read the NCCL inside {p['image']} (rc {rc}): {err.strip()[-2000:]}")
    try:
        nccl = si.image_nccl(out)
    except ValueError as exc:
        module.fail_json(msg=f"{where}{p['image']}: {exc}")
    module.exit_json(changed=False, nccl=nccl, msg=si.nccl_line(p["node"] or "this node", nccl))


if __name__ == "__main__":
    main()
