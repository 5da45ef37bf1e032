#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Module gb10.serving.flashinfer_jit_rebuilt: did a serving start rebuild a prebuilt FlashInfer module?"""

from __future__ import annotations

DOCUMENTATION = r"""
module: flashinfer_jit_rebuilt
short_description: After a serving unit started, prove that no prebuilt FlashInfer JIT module was rebuilt
description:
  - For every module of the node's FlashInfer cache stamped by the prebuild for I(image), compares C(.ninja_log)
    (ninja appends one line per unit it runs) and the C(.so)'s sha256 with what the stamp recorded when the prebuild
    finished (issue 17). A load with ninja having nothing to do changes neither.
  - Fails, naming the node, the module and what differed, when I(fail) is true and any module was rebuilt.
options:
  fail:
    description: Fail when a module was rebuilt (false only reports).
    type: bool
    default: true
extends_documentation_fragment:
  - gb10.serving.read_only
  - gb10.serving.node
  - gb10.serving.flashinfer_stamps
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Prove that the start rebuilt no FlashInfer module
  gb10.serving.flashinfer_jit_rebuilt:
    node: "{{ inventory_hostname }}"
    cache_dir: /var/lib/gb10/flashinfer-cache
    image: registry:5000/vllm@sha256:0123...
"""

RETURN = r"""
modules:
  description: The stamped modules checked, each with its build folder and findings (empty when not rebuilt).
  type: list
  elements: dict
  returned: always
rebuilt:
  description: How many of them were rebuilt since their prebuild (0 is the goal).
  type: int
  returned: always
message:
  description: One line for the operator.
  type: str
  returned: always
"""

import glob
import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.build_identity import rebuild_findings
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.cache_files import file_sha256, read_text
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.cache_layout import STAMP_NAME
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.stamps import STAMPS_ARGUMENT_SPEC


def run(params):
    modules = []
    for path in sorted(glob.glob(os.path.join(params["cache_dir"], ".cache/flashinfer/*/*/cached_ops/*", STAMP_NAME))):
        try:
            stamp_data = json.loads(read_text(path, errors="replace") or "null")
        except ValueError:
            stamp_data = None
        if not stamp_data or stamp_data.get("image_digest") != params["image"]:
            continue
        build_dir = os.path.dirname(path)
        library = os.path.join(build_dir, f"{stamp_data.get('module', os.path.basename(build_dir))}.so")
        findings = rebuild_findings(
            stamp_data,
            read_text(os.path.join(build_dir, ".ninja_log"), errors="replace") or "",
            file_sha256(library),
        )
        modules.append({"module": stamp_data.get("module"), "build_dir": build_dir, "findings": findings})
    rebuilt = [m for m in modules if m["findings"]]
    if rebuilt:
        message = (
            f"{params['node']}: the serving start rebuilt {len(rebuilt)} prebuilt FlashInfer module(s): "
            + "; ".join(f"{m['module']} ({m['build_dir']}): {', '.join(m['findings'])}" for m in rebuilt)
            + ". The serving unit's environment reaches build.ninja differently from the prebuild's (compare"
            " build.ninja there with the stamp's ninja_sha256), or the cache was changed beside it. Re-run site.yml:"
            " flashinfer_jit prebuilds again with no model resident and the serving role refuses a differing"
            " environment before the unit starts."
        )
    else:
        message = f"{params['node']}: 0 rebuilt modules ({len(modules)} prebuilt module(s) checked)"
    return {"changed": False, "modules": modules, "rebuilt": len(rebuilt), "message": message}


def main():
    module = AnsibleModule(
        argument_spec={
            **STAMPS_ARGUMENT_SPEC,
            "fail": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    result = run(module.params)
    if result["rebuilt"] and module.params["fail"]:
        module.fail_json(msg=result["message"], **{k: v for k, v in result.items() if k != "changed"})
    module.exit_json(**result)


if __name__ == "__main__":
    main()
