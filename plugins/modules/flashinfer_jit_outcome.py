#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Module gb10.serving.flashinfer_jit_outcome: read a FlashInfer JIT build log; an OOM kill is reported as one."""

from __future__ import annotations

DOCUMENTATION = r"""
module: flashinfer_jit_outcome
short_description: Classify a FlashInfer JIT build log, naming the process earlyoom or the kernel killed
description:
  - Reads the build log (ninja's lines) on the node and the earlyoom and kernel journal since the build started.
  - A ninja step that FAILED with code 137/143, an nvcc "died due to signal", gcc's "Killed signal terminated program",
    or "Compilation terminated." with no compiler diagnostic is an out-of-memory kill, not a compile error
    (seed 004 pitfall 2); the journal lines that name the killed process are returned with it.
options:
  log:
    description: The build log on the node.
    type: path
    required: true
  since:
    description: Unix time the build started; journal lines before it are not read.
    type: int
    required: true
  earlyoom_unit:
    description: The earlyoom unit whose journal names killed processes.
    type: str
    default: earlyoom.service
extends_documentation_fragment:
  - gb10.serving.read_only
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Read the build log
  gb10.serving.flashinfer_jit_outcome:
    log: /var/lib/gb10/flashinfer-cache/.cache/flashinfer/0.6.18/121a/cached_ops/fused_moe_120/gb10-prebuild.log
    since: 1764489600
"""

RETURN = r"""
kind:
  description: ok, oom_kill, compile_error or failed.
  type: str
  returned: always
message:
  description: One paragraph for the operator.
  type: str
  returned: always
steps:
  description: The failed ninja steps with their kind and reason.
  type: list
  elements: dict
  returned: always
kills:
  description: Processes earlyoom or the kernel killed since the build started.
  type: list
  elements: dict
  returned: always
journal:
  description: The journal lines that name a killed process.
  type: list
  elements: str
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.build_log import classify_build_log


def _journal(module, args):
    journalctl = module.get_bin_path("journalctl")
    if not journalctl:
        return []
    rc, out, _err = module.run_command([journalctl, "--no-pager", "-o", "short", *args])
    return out.splitlines() if rc == 0 else []


def main():
    module = AnsibleModule(
        argument_spec={
            "log": {"type": "path", "required": True},
            "since": {"type": "int", "required": True},
            "earlyoom_unit": {"type": "str", "default": "earlyoom.service"},
        },
        supports_check_mode=True,
    )
    try:
        with open(module.params["log"], errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError as exc:
        module.fail_json(msg=f"no build log at {module.params['log']}: {exc}")
    since = f"@{module.params['since']}"
    journal = _journal(module, ["-u", module.params["earlyoom_unit"], "--since", since])
    journal += _journal(module, ["-k", "--since", since])
    result = classify_build_log(lines, journal)
    named = [line for line in journal if "sending SIG" in line or "Killed process" in line]
    module.exit_json(changed=False, journal=named, **result)


if __name__ == "__main__":
    main()
