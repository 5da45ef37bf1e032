#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Module gb10.serving.flashinfer_jit_wait: wait a while for the FlashInfer build and say how far it is."""

from __future__ import annotations

DOCUMENTATION = r"""
module: flashinfer_jit_wait
short_description: Wait up to a minute for the FlashInfer prebuild container, and report ninja's progress
description:
  - Polls the build container every few seconds for up to I(wait) seconds, then reads the build log for ninja's
    last C([k/N]) and returns one line with it, the elapsed time and an estimate (from the last build's seconds
    when known, else this build's pace), so that the role can print progress at least once a minute instead of a
    wall of retries (issue 17).
  - A build whose log has not moved for the stall limit (I(stall_s), else 3 x the last build's slowest unit, at
    least 30 minutes) is reported as stalled.
options:
  container:
    description: The build container's name.
    type: str
    required: true
  log:
    description: The build log on the node (ninja's lines, tee'd by the entry point).
    type: path
    required: true
  started:
    description: Unix time the build started.
    type: int
    required: true
  wait:
    description: Seconds to wait for the container to finish before reporting.
    type: int
    default: 60
  stall_s:
    description: Seconds without progress that make a stall; 0 derives it from I(last_build).
    type: int
    default: 0
  last_build:
    description: The last finished build's figures (build_seconds, steps, worst_unit_seconds, node), or empty.
    type: dict
    default: {}
  timeout:
    description: Seconds the whole build may take.
    type: int
    required: true
extends_documentation_fragment:
  - gb10.serving.read_only
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Wait up to a minute for the build, then say how far it is
  gb10.serving.flashinfer_jit_wait:
    container: gb10-flashinfer-jit
    log: /var/lib/gb10/flashinfer-cache/.cache/flashinfer/0.6.18/121a/cached_ops/fused_moe_120/gb10-prebuild.log
    started: 1764489600
    timeout: 5400
"""

RETURN = r"""
running:
  description: Whether the build container still runs.
  type: bool
  returned: always
stalled:
  description: Whether the log has not moved for the stall limit.
  type: bool
  returned: always
timed_out:
  description: Whether the build has run longer than I(timeout).
  type: bool
  returned: always
message:
  description: "[k/N], elapsed, estimate (and STALLED when so)."
  type: str
  returned: always
k:
  description: Steps finished, from ninja's last [k/N].
  type: int
  returned: always
n:
  description: Steps in all.
  type: int
  returned: always
elapsed:
  description: Seconds since the build started.
  type: int
  returned: always
stall_s:
  description: The stall limit used, seconds.
  type: int
  returned: always
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.build_watch import (
    build_progress,
    stall_seconds,
)

POLL_S = 5


def _running(module, docker, name):
    rc, out, _err = module.run_command([docker, "inspect", "-f", "{{.State.Running}}", name])
    return rc == 0 and out.strip() == "true"


def main():
    module = AnsibleModule(
        argument_spec={
            "container": {"type": "str", "required": True},
            "log": {"type": "path", "required": True},
            "started": {"type": "int", "required": True},
            "wait": {"type": "int", "default": 60},
            "stall_s": {"type": "int", "default": 0},
            "last_build": {"type": "dict", "default": {}},
            "timeout": {"type": "int", "required": True},
        },
        supports_check_mode=True,
    )
    params = module.params
    docker = module.get_bin_path("docker", required=True)
    deadline = time.time() + max(1, params["wait"])
    running = _running(module, docker, params["container"])
    while running and time.time() < deadline:
        time.sleep(POLL_S)
        running = _running(module, docker, params["container"])
    now = time.time()
    try:
        with open(params["log"], errors="replace") as handle:
            lines = handle.read().splitlines()
        # The entry point flushes every ninja line to the log: its mtime is when the build last moved.
        moved = os.stat(params["log"]).st_mtime
    except OSError:
        lines, moved = [], params["started"]
    last = params["last_build"] or {}
    stall = stall_seconds(params["stall_s"], last.get("worst_unit_seconds"))
    elapsed = int(now - params["started"])
    progress = build_progress(
        lines,
        elapsed,
        int(now - max(moved, params["started"])) if running else 0,
        stall,
        {"seconds": last.get("build_seconds"), "node": last.get("node")} if last.get("build_seconds") else None,
    )
    module.exit_json(
        changed=False,
        running=running,
        stalled=running and progress["stalled"],
        timed_out=running and elapsed > params["timeout"],
        message=progress["message"] if running else f"finished after {elapsed} s ({progress['message'].split(' ')[0]})",
        k=progress["k"],
        n=progress["n"],
        elapsed=elapsed,
        stall_s=stall,
    )


if __name__ == "__main__":
    main()
