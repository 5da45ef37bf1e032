#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Module gb10.serving.flashinfer_jit_identity: is the serving unit's build.ninja the prebuild's?"""

from __future__ import annotations

DOCUMENTATION = r"""
module: flashinfer_jit_identity
short_description: Compare the build.ninja a serving unit would write with the one FlashInfer's prebuild wrote
description:
  - flashinfer 0.6.18 runs ninja before it loads a JIT module, and ninja rebuilds every unit whose command changed.
    Anything in the serving process's environment that reaches build.ninja (CC, CXX, CUDA_HOME, FLASHINFER_*
    variables, the arch list, include paths, the cache's container path) makes it rebuild the fused-MoE module at
    its first MoE forward, beside the weights (issue 17, seed 004 "The CUTLASS saga").
  - Writes the serving unit's environment files to a root-only scratch folder, runs the given C(docker run) argv
    (the serving unit's own, rendered by the serving role, running the prebuild entry point with C(--ninja-only),
    where generate_ninja_build_for_op returns the text and nothing is written to the cache), removes the files,
    and compares the text's sha256 with the prebuild stamp's C(ninja_sha256).
  - Fails, naming the node and the differing lines (a unified diff of the two build.ninja files, trimmed), when
    they differ.
extends_documentation_fragment:
  - gb10.serving.node
  - gb10.serving.flashinfer_stamps
options:
  argv:
    description:
      - The C(docker run) argv of the throwaway container, ending in the entry point's C(--ninja-only); the module
        appends C(--compute-capability) from each stamp. Its --env-file paths are those of I(env_files).
    type: list
    elements: str
    required: true
  env_files:
    description: The serving unit's environment files, rendered (path and content); written 0600, removed after.
    type: list
    elements: dict
    required: true
  scratch_dir:
    description: Root-only folder for those files and the serving unit's build.ninja (never the cache).
    type: path
    required: true
  timeout:
    description: Seconds one container may take.
    type: int
    default: 300
attributes:
  check_mode:
    support: partial
    description: Can run in check_mode and return changed status prediction without modifying target.
    details:
      - It runs in check mode too, so that check mode refuses what a real run would refuse (issue 37 item 3) - the
        same throwaway container (C(--rm), never a pull there - C(docker run --pull never)) and the same root-only
        files in O(scratch_dir) (the environment files, removed after, and the serving unit's build.ninja, kept for
        the operator), nothing else.
      - In check mode an image the node does not hold yet, or a mount whose source is not on the node yet (a file
        the real run installs first), is not run - a warning says that the check is made by the real run.
  diff_mode:
    support: none
    description: It writes nothing a diff could show; the differing build.ninja lines are in its message.
  platform:
    support: full
    description: Runs on the node, whose Docker engine starts the throwaway container.
    platforms: posix
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Compare the serving unit's build.ninja with the prebuild's
  gb10.serving.flashinfer_jit_identity:
    node: "{{ inventory_hostname }}"
    cache_dir: /var/lib/gb10/flashinfer-cache
    image: registry:5000/vllm@sha256:0123...
    argv: [/usr/bin/docker, run, --rm, --env-file, /run/gb10/fi/engine.env, "...", --ninja-only]
    env_files: [{path: /run/gb10/fi/engine.env, content: "CC=gcc\n"}]
    scratch_dir: /run/gb10/fi
"""

RETURN = r"""
checked:
  description: The stamped modules compared (their build folders); empty when the cache holds none for the image.
  type: list
  elements: str
  returned: success
same:
  description: Whether the serving unit writes the prebuild's build.ninja; null in check mode where the node does not
    hold the image yet.
  type: bool
  returned: success
sha256:
  description: The sha256 of the serving unit's build.ninja.
  type: str
  returned: success
diff:
  description: Unified diff (no context) of the prebuild's build.ninja against the serving unit's, trimmed.
  type: list
  elements: str
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

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.build_identity import ninja_identity
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.cache_files import read_text
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.cache_layout import STAMP_NAME
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.stamps import STAMPS_ARGUMENT_SPEC

MARKER = "GB10_PREBUILD_NINJA "


def _write_private(path, content):
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(content)


def _stamps(cache_dir, image):
    found = []
    for path in sorted(glob.glob(os.path.join(cache_dir, ".cache/flashinfer/*/*/cached_ops/*", STAMP_NAME))):
        text = read_text(path)
        try:
            data = json.loads(text) if text else None
        except ValueError:
            data = None
        if data and data.get("image_digest") == image:
            found.append((os.path.dirname(path), data))
    return found


def _check_mode_argv(argv):
    """``docker run`` never pulling (a pull changes the node's images): check mode's own argv."""
    argv = list(argv)
    if len(argv) > 1 and argv[1] == "run":
        argv[2:2] = ["--pull", "never"]
    return argv


def _missing_mount_sources(argv, own):
    """The --volume sources of ``argv`` that are not on the node, but the files this module writes itself (``own``):
    docker would make a missing one as an empty folder, a change check mode must not make."""
    sources = [argv[i + 1].split(":", 1)[0] for i, word in enumerate(argv[:-1]) if word in ("--volume", "-v")]
    return [source for source in sources if source not in own and not os.path.exists(source)]


def _serving_ninja(module, params, capability):
    docker_argv = _check_mode_argv(params["argv"]) if module.check_mode else params["argv"]
    argv = ["timeout", str(params["timeout"]), *docker_argv, "--compute-capability", str(capability)]
    try:
        for item in params["env_files"]:
            _write_private(item["path"], item.get("content") or "")
        rc, out, err = module.run_command(argv, environ_update={"LC_ALL": "C"})
    finally:
        # The secrets file of the serving unit is one of them: never left behind.
        for item in params["env_files"]:
            if os.path.exists(item["path"]):
                os.unlink(item["path"])
    found = [line[len(MARKER) :] for line in out.splitlines() if line.startswith(MARKER)]
    if rc != 0 or not found:
        tail = (out + err).strip().splitlines()[-8:]
        module.fail_json(
            msg=f"{params['node']}: the throwaway container of the serving image could not generate the serving"
            f" unit's build.ninja (rc {rc}): {' / '.join(tail)}. No serving unit was started.",
            diff=[],
        )
    return json.loads(found[-1])


def main():
    module = AnsibleModule(
        argument_spec={
            **STAMPS_ARGUMENT_SPEC,
            "argv": {"type": "list", "elements": "str", "required": True},
            # The secrets file of the serving unit is one of them.
            "env_files": {"type": "list", "elements": "dict", "required": True, "no_log": True},
            "scratch_dir": {"type": "path", "required": True},
            "timeout": {"type": "int", "default": 300},
        },
        supports_check_mode=True,
    )
    params = module.params
    node = params["node"]
    checked = []
    sha = ""
    stamps = _stamps(params["cache_dir"], params["image"])
    if stamps and module.check_mode:
        rc, _out, _err = module.run_command([params["argv"][0], "image", "inspect", params["image"]])
        own = {item["path"] for item in params["env_files"]}
        missing = [] if rc != 0 else _missing_mount_sources(params["argv"], own)
        if rc != 0 or missing:
            absent = f"{params['image']} is" if rc != 0 else f"{', '.join(missing)} (mounted) are"
            message = (
                f"{node}: check mode: {absent} not on this node yet (a real run puts them there first), so the"
                " FlashInfer build identity (the serving unit's build.ninja against the prebuild's) is checked by the"
                " real run"
            )
            module.warn(message)
            module.exit_json(changed=False, checked=[], same=None, sha256="", diff=[], message=message)
    for build_dir, stamp_data in stamps:
        capability = stamp_data.get("compute_capability")
        if not capability:
            module.fail_json(
                msg=f"{node}: the prebuild stamp in {build_dir} records no compute capability (stamped before"
                " issue 17). Run the gb10.serving.flashinfer_jit role (site.yml does) to restamp it.",
                diff=[],
            )
        serving = _serving_ninja(module, params, capability)
        scratch = os.path.join(params["scratch_dir"], f"{serving['module']}.serving.ninja")
        _write_private(scratch, serving["text"])
        prebuilt = os.path.join(build_dir, "build.ninja")
        verdict = ninja_identity(node, stamp_data, read_text(prebuilt), serving["text"], serving.get("aot"))
        if not verdict["same"]:
            module.fail_json(
                msg=verdict["message"]
                + f" Differing lines (prebuild {prebuilt}, serving unit {scratch}): "
                + " | ".join(line for line in verdict["diff"] if not line.startswith(("+++", "---", "@@"))),
                diff=verdict["diff"],
                sha256=serving["sha256"],
            )
        checked.append(build_dir)
        sha = serving["sha256"]
    message = (
        f"{node}: the serving unit writes the prebuild's build.ninja for {', '.join(checked)}"
        if checked
        else f"{node}: no prebuilt FlashInfer module in {params['cache_dir']} for {params['image']}"
    )
    module.exit_json(changed=False, checked=checked, same=True, sha256=sha, diff=[], message=message)


if __name__ == "__main__":
    main()
