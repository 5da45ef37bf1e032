#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Module gb10.serving.flashinfer_jit_share_manifest: the files a node gives of its prebuilt FlashInfer module."""

from __future__ import annotations

DOCUMENTATION = r"""
module: flashinfer_jit_share_manifest
short_description: List, hash and check against its stamp the prebuilt FlashInfer module a node gives to another
description:
  - On the node that built the module (or already holds it), lists every file of the module's build folder
    (C(cached_ops/<module>)) and of the cache folders that hold build.ninja's generated inputs, with size, sha256 and
    mtime_ns, and checks the .so and build.ninja against the sha256 its stamp recorded, and that .ninja_log (and
    .ninja_deps where build.ninja has a C(deps) line) are there (issue 17, the receiving node's serving start must find
    ninja with nothing to do).
  - Writes that manifest to I(dest) (mode 0600), what the transfer script's C(--layout files) serve and receive take.
    The module's files are only read.
options:
  node:
    description: The node's inventory name, for the messages.
    type: str
    required: true
  cache_dir:
    description: The node's FlashInfer cache folder on the host.
    type: path
    required: true
  workspace_base:
    description: The cache's path inside the containers (build.ninja holds absolute paths under it).
    type: str
    required: true
  flashinfer_version:
    description: The flashinfer-python version of the image.
    type: str
    required: true
  compute_capability:
    description: The GPU's compute capability (12.1 on GB10).
    type: str
    required: true
  dest:
    description: Where the manifest is written (JSON, mode 0600).
    type: path
    required: true
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: In check mode the manifest is computed and returned, not written.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: List what spark-1 gives of its module
  gb10.serving.flashinfer_jit_share_manifest:
    node: spark-1
    cache_dir: /var/lib/gb10/flashinfer-cache
    workspace_base: /root/.cache/flashinfer-workspace
    flashinfer_version: "0.6.18"
    compute_capability: "12.1"
    dest: /var/lib/gb10/flashinfer-share/manifest.json
"""

RETURN = r"""
root:
  description: The host folder the manifest's paths are under (the arch workspace of the cache).
  type: str
  returned: always
files:
  description: How many files the manifest lists.
  type: int
  returned: always
bytes:
  description: Their size together.
  type: int
  returned: always
stamp:
  description: The builder's stamp (the receiver must hold the same after the copy).
  type: dict
  returned: always
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.cache_files import file_sha256, read_text
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.cache_layout import cache_paths
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.sharing import (
    ninja_input_dirs,
    share_manifest,
)


def _listing(root, folders):
    files = {}
    for folder in folders:
        top = os.path.join(root, folder)
        for current, _dirs, names in os.walk(top):
            for name in names:
                path = os.path.join(current, name)
                info = os.lstat(path)
                if not os.path.isfile(path) or os.path.islink(path):
                    continue
                relative = os.path.relpath(path, root)
                files[relative] = {"size": info.st_size, "sha256": file_sha256(path), "mtime_ns": info.st_mtime_ns}
    return files


def run(params, check_mode):
    host = cache_paths(params["cache_dir"], params["flashinfer_version"], params["compute_capability"])
    container = cache_paths(params["workspace_base"], params["flashinfer_version"], params["compute_capability"])
    module = host["module"]
    ninja_text = read_text(host["ninja"])
    stamp_text = read_text(host["stamp"])
    try:
        stamp_data = json.loads(stamp_text) if stamp_text else {}
    except ValueError:
        stamp_data = {}
    folders = [f"cached_ops/{module}", *ninja_input_dirs(ninja_text, container["workspace"])]
    manifest, problems = share_manifest(
        params["node"], _listing(host["workspace"], folders), stamp_data, module, ninja_text
    )
    result = {
        "changed": False,
        "root": host["workspace"],
        "files": len(manifest),
        "bytes": sum(entry["size"] for entry in manifest.values()),
        "stamp": stamp_data,
        "problems": problems,
    }
    text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    if not problems and read_text(params["dest"]) != text:
        result["changed"] = True
        if not check_mode:
            tmp = params["dest"] + ".tmp"
            with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as handle:
                handle.write(text)
            os.chmod(tmp, 0o600)
            os.replace(tmp, params["dest"])
    return result


def main():
    module = AnsibleModule(
        argument_spec={
            "node": {"type": "str", "required": True},
            "cache_dir": {"type": "path", "required": True},
            "workspace_base": {"type": "str", "required": True},
            "flashinfer_version": {"type": "str", "required": True},
            "compute_capability": {"type": "str", "required": True},
            "dest": {"type": "path", "required": True},
        },
        supports_check_mode=True,
    )
    result = run(module.params, module.check_mode)
    if result["problems"]:
        module.fail_json(msg=" | ".join(result["problems"]), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
