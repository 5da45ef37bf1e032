# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action plugin gb10.serving.node_files: read the sources on the controller, hand them to the module in one run."""

from __future__ import annotations

import base64
import os

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.gb10.serving.plugins.module_utils._node_files import duplicate_targets, source_files

_ARGUMENT_SPEC = {
    "src": {"type": "list", "elements": "str", "required": True},
    "dest": {"type": "str", "required": True},
    "mode": {"type": "str", "required": True},
    "directory_mode": {"type": "str", "default": "0755"},
    "owner": {"type": "str", "default": "root"},
    "group": {"type": "str", "default": "root"},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_diff = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars or {})
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=_ARGUMENT_SPEC)
        dest = args["dest"]
        if not os.path.isabs(dest):
            return {**result, "failed": True, "msg": f"node_files: dest {dest!r} is not an absolute path"}
        pairs = []
        try:
            for src in args["src"]:
                # the role's files/ for a relative path, as ansible.builtin.copy looks
                pairs += source_files(self._find_needle("files", src), dest)
        except AnsibleError as exc:
            return {**result, "failed": True, "msg": f"node_files: {exc.message}"}
        twice = duplicate_targets(pairs)
        if twice:
            return {**result, "failed": True, "msg": f"node_files: two sources write {', '.join(twice)}"}
        files = []
        for local, path in pairs:
            with open(local, "rb") as handle:
                content = base64.b64encode(handle.read()).decode("ascii")
            files.append({"path": os.path.relpath(path, dest), "content": content})
        module_args = {key: args[key] for key in ("dest", "mode", "directory_mode", "owner", "group")}
        module_args["files"] = files
        answer = self._execute_module(
            module_name="gb10.serving.node_files", module_args=module_args, task_vars=task_vars or {}
        )
        answer.pop("invocation", None)  # the files' bytes, base64: noise in -v output
        result.update(answer)
        return result
