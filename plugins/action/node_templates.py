# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action plugin gb10.serving.node_templates: render a role's templates on the controller, write them in one run."""

from __future__ import annotations

import base64
import datetime
import os
import pwd
import time

from ansible import constants as C
from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase
from ansible.template import trust_as_template

from ansible_collections.gb10.serving.plugins.module_utils._node_write import (
    DIRECTORY_OPTIONS,
    FILE_OPTIONS,
    validate_problems,
)

_ARGUMENT_SPEC = {
    "directories": {"type": "list", "elements": "dict", "default": [], "options": DIRECTORY_OPTIONS},
    "files": {
        "type": "list",
        "elements": "dict",
        "default": [],
        "options": FILE_OPTIONS,
        "mutually_exclusive": [["src", "content", "file"]],
        "required_one_of": [["src", "content", "file"]],
    },
}
# ansible.builtin.template's defaults: trim_blocks on, lstrip_blocks off, "\n" line ends.
_OVERRIDES = {"trim_blocks": True, "lstrip_blocks": False, "newline_sequence": "\n"}


def template_vars(src, source, dest):
    """The variables ansible.builtin.template adds (ansible-core 2.19, ansible/_internal/_templating/_template_vars.py,
    whose public wrapper is deprecated for collections, "collections should inline the necessary variables")."""
    stat = os.stat(source)
    try:
        uid = pwd.getpwuid(stat.st_uid).pw_name
    except KeyError:
        uid = stat.st_uid
    managed = C.config.get_config_value("DEFAULT_MANAGED_STR").format(
        host="{{ template_host }}", uid="{{ template_uid }}", file="{{ template_path }}"
    )
    return {
        "template_host": os.uname()[1],
        "template_path": src,
        "template_mtime": datetime.datetime.fromtimestamp(stat.st_mtime),
        "template_uid": uid,
        "template_run_date": datetime.datetime.now(),
        "template_destpath": dest,
        "template_fullpath": source,
        "ansible_managed": trust_as_template(time.strftime(managed, time.localtime(stat.st_mtime))),
    }


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_diff = True

    def _render(self, entry, task_vars):
        """The template's text with the task's variables and the entry's own, as ansible.builtin.template renders."""
        source = self._find_needle("templates", entry["src"])
        searchpath = [*task_vars.get("ansible_search_path", []), self._loader._basedir, os.path.dirname(source)]
        searchpath = [path for folder in searchpath for path in (os.path.join(folder, "templates"), folder)]
        added = template_vars(entry["src"], source, entry["dest"])
        if "ansible_managed" in task_vars:  # as ansible.builtin.template: a site's own ansible_managed is kept
            del added["ansible_managed"]
        variables = {**task_vars, **added, **(entry["vars"] or {})}
        templar = self._templar.copy_with_new_env(searchpath=searchpath, available_variables=variables)
        text = templar.template(
            trust_as_template(self._loader.get_text_file_contents(source)),
            escape_backslashes=False,
            overrides=_OVERRIDES,
        )
        return "" if text is None else text

    def _bytes(self, entry, task_vars):
        """The file's bytes: a template rendered, a file of the role's ``files/`` as it is, or the content given."""
        if entry["src"] is not None:
            return self._render(entry, task_vars).encode("utf-8")
        if entry["file"] is not None:
            with open(self._find_needle("files", entry["file"]), "rb") as handle:
                return handle.read()
        return entry["content"].encode("utf-8")

    def run(self, tmp=None, task_vars=None):
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=_ARGUMENT_SPEC)
        problems = validate_problems(args["files"])
        if problems:
            return {**result, "failed": True, "msg": "node_templates: " + "; ".join(problems)}
        files = []
        for entry in args["files"]:
            try:
                data = self._bytes(entry, task_vars)
            except AnsibleError as exc:
                named = entry["src"] or entry["file"]
                return {**result, "failed": True, "msg": f"node_templates: {named} for {entry['dest']}: {exc}"}
            kept = {key: entry[key] for key in FILE_OPTIONS if key not in ("src", "vars", "content", "file")}
            files.append({**kept, "content": base64.b64encode(data).decode("ascii")})
        answer = self._execute_module(
            module_name="gb10.serving.node_templates",
            module_args={"directories": args["directories"], "files": files},
            task_vars=task_vars,
        )
        answer.pop("invocation", None)  # the rendered files, base64: noise in -v output
        result.update(answer)
        return result
