#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Module gb10.serving.flashinfer_jit_plan: MAX_JOBS, refusals and cache state for the FlashInfer JIT prebuild."""

from __future__ import annotations

DOCUMENTATION = r"""
module: flashinfer_jit_plan
short_description: Decide whether and how to prebuild FlashInfer's CUTLASS fused-MoE module on this node
description:
  - Reads the node's MemAvailable (/proc/meminfo) and core count unless given, and computes
    MAX_JOBS = min(cores, floor((MemAvailable - reserve) / per-job peak RSS)) with the arithmetic as text.
  - Refuses a build environment that flashinfer would turn into a debug build (FLASHINFER_JIT_VERBOSE=1 without
    FLASHINFER_JIT_DEBUG=0, or FLASHINFER_JIT_DEBUG=1).
  - Looks in the host cache folder for the module of (image digest, flashinfer version, arch) with its prebuild stamp.
options:
  cache_dir:
    description: Host folder bind-mounted as FLASHINFER_WORKSPACE_BASE in the build and serving containers.
    type: path
    required: true
  workspace_base:
    description: The container path of that folder (FLASHINFER_WORKSPACE_BASE).
    type: str
    required: true
  image_digest:
    description: The gated serving image, repository@sha256:...
    type: str
    required: true
  flashinfer_version:
    description: The flashinfer-python version the image pins.
    type: str
    required: true
  compute_capability:
    description: The node GPU's compute capability, C(12.1) for GB10.
    type: str
    required: true
  env:
    description: The container environment the build gets (the plan's for this node).
    type: dict
    default: {}
  per_job_peak_mib:
    description:
      - Peak RSS of one compile job, MiB.
      - 0 takes the worst figure measured for this node's CPU architecture (x86_64 10605, the fused_moe_120 cicc peak
        on an H200 host; aarch64 also 10605, since GB10's only figure, seed 004's 5284, is a killed cicc's lower
        bound). See docs/flashinfer-jit.md.
    type: int
    default: 0
  reserve_mib:
    description: Memory kept free for everything else, MiB.
    type: int
    required: true
  cores:
    description: Cores to use; 0 reads the node.
    type: int
    default: 0
  mem_available_mib:
    description: MemAvailable in MiB; 0 reads /proc/meminfo.
    type: int
    default: 0
extends_documentation_fragment:
  - gb10.serving.read_only
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Plan the FlashInfer prebuild
  gb10.serving.flashinfer_jit_plan:
    cache_dir: /var/lib/gb10/flashinfer-cache
    workspace_base: /root/.cache/flashinfer-workspace
    image_digest: registry:5000/vllm@sha256:0123...
    flashinfer_version: 0.6.18
    compute_capability: "12.1"
    reserve_mib: 8192
"""

RETURN = r"""
max_jobs:
  description: MAX_JOBS for the build (0 when not even one job fits).
  type: int
  returned: always
arithmetic:
  description: The MAX_JOBS arithmetic, one line.
  type: str
  returned: always
problems:
  description: Reasons the build may not start.
  type: list
  elements: str
  returned: always
present:
  description: Whether the cache holds the module with a matching stamp.
  type: bool
  returned: always
reason:
  description: Why the cache counts as present or not.
  type: str
  returned: always
kind:
  description:
    - How the present module came, from its stamp - C(built) in this cache, or C(prebuilt) (the image carries it,
      a FlashInfer JIT-cache provider for the node's architecture; nothing was built). Empty when not present.
  type: str
  returned: always
per_job_peak_mib:
  description: The per-job figure the arithmetic used, MiB.
  type: int
  returned: always
per_job_peak_source:
  description: Where that figure comes from (the inventory, or the measurement for this node's architecture).
  type: str
  returned: always
module:
  description: The module name (fused_moe_120 on GB10).
  type: str
  returned: always
host_paths:
  description: Library, stamp, log, build.ninja and build folder on the host.
  type: dict
  returned: always
share_key:
  description:
    - What another node must have in common with this one to give it its module (image digest, flashinfer
      version, arch, the cache's container path, the variables that reach build.ninja), as a JSON string.
  type: str
  returned: always
last_build:
  description:
    - The stamp's figures of the last finished build on this node (build_seconds, steps, worst_unit_seconds,
      max_jobs), empty when none; the progress estimate and the stall limit of the next build come from them.
  type: dict
  returned: always
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.build_env import env_problems
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.cache_files import file_sha256
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.cache_layout import arch_dir, cache_paths
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.errors import FlashinferJitError
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.job_sizing import (
    default_per_job_peak,
    max_jobs,
)
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.sharing import share_key
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.stamps import cache_state


def _mem_available_mib():
    with open("/proc/meminfo") as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    return 0


def _machine():
    """The node's CPU architecture as the kernel names it (x86_64, aarch64): the per-job figure depends on it."""
    return os.uname().machine


def _stamp(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def run(params):
    cores = params["cores"] or os.cpu_count() or 1
    mem = params["mem_available_mib"] or _mem_available_mib()
    if params["per_job_peak_mib"]:
        per_job, per_job_source = params["per_job_peak_mib"], "stated (flashinfer_jit_per_job_peak_mib)"
    else:
        per_job, per_job_source = default_per_job_peak(_machine())
    sizing = max_jobs(cores, mem, params["reserve_mib"], per_job)
    problems = env_problems(params["env"])
    if sizing["problem"]:
        problems.append(sizing["problem"])
    host = cache_paths(params["cache_dir"], params["flashinfer_version"], params["compute_capability"])
    container = cache_paths(params["workspace_base"], params["flashinfer_version"], params["compute_capability"])
    wanted = {
        "image_digest": params["image_digest"],
        "flashinfer_version": params["flashinfer_version"],
        "compute_capability": params["compute_capability"],
    }
    found = _stamp(host["stamp"])
    present, reason = cache_state(wanted, found, file_sha256(host["library"]), file_sha256(host["ninja"]))
    # The last finished build of this module on this node, whatever it was built for: the estimate of the next.
    last_build = (
        {key: found.get(key) for key in ("build_seconds", "steps", "worst_unit_seconds", "max_jobs")}
        if found and found.get("build_seconds")
        else {}
    )
    return {
        "changed": False,
        "max_jobs": sizing["jobs"],
        "arithmetic": sizing["arithmetic"],
        "per_job_peak_mib": per_job,
        "per_job_peak_source": per_job_source,
        "problems": problems,
        "present": present,
        "reason": reason,
        "kind": (found.get("kind") or "built") if present else "",
        "module": host["module"],
        "arch": arch_dir(params["compute_capability"]),
        "host_paths": host,
        "container_paths": container,
        "last_build": last_build,
        "share_key": share_key(
            params["image_digest"],
            params["flashinfer_version"],
            params["compute_capability"],
            params["workspace_base"],
            params["env"],
        ),
    }


def main():
    module = AnsibleModule(
        argument_spec={
            "cache_dir": {"type": "path", "required": True},
            "workspace_base": {"type": "str", "required": True},
            "image_digest": {"type": "str", "required": True},
            "flashinfer_version": {"type": "str", "required": True},
            "compute_capability": {"type": "str", "required": True},
            "env": {"type": "dict", "default": {}},
            "per_job_peak_mib": {"type": "int", "default": 0},
            "reserve_mib": {"type": "int", "required": True},
            "cores": {"type": "int", "default": 0},
            "mem_available_mib": {"type": "int", "default": 0},
        },
        supports_check_mode=True,
    )
    try:
        module.exit_json(**run(module.params))
    except FlashinferJitError as exc:
        module.fail_json(msg=str(exc))


if __name__ == "__main__":
    main()
