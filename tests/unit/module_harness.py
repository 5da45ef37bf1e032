# Copyright: gb10.serving maintainers
# Apache-2.0
"""Runs a module's main() in the test process: its arguments patched in, run_command answered by the test, and
exit_json / fail_json / warn caught, so a test reads the result the module would have printed."""

from __future__ import annotations

import importlib
import json
from unittest import mock

import pytest

basic = importlib.import_module("ansible.module_utils.basic")
testing = importlib.import_module("ansible.module_utils.testing")


class ModuleExit(Exception):
    def __init__(self, result):
        super().__init__(result)
        self.result = result


def _exit_json(self, **kwargs):
    kwargs.setdefault("failed", False)
    kwargs["warnings_emitted"] = list(getattr(self, "_harness_warnings", []))
    raise ModuleExit(kwargs)


def _fail_json(self, msg, **kwargs):
    raise ModuleExit({**kwargs, "failed": True, "msg": msg})


def _warn(self, warning):
    self.__dict__.setdefault("_harness_warnings", []).append(warning)


def run_main(main, args, run_command):
    """The result of ``main()`` with ``args``; ``run_command(self, cmd, **kwargs)`` answers the module's commands."""
    with (
        testing.patch_module_args(args),
        mock.patch.object(basic.AnsibleModule, "run_command", run_command),
        mock.patch.object(basic.AnsibleModule, "exit_json", _exit_json),
        mock.patch.object(basic.AnsibleModule, "fail_json", _fail_json),
        mock.patch.object(basic.AnsibleModule, "warn", _warn),
        pytest.raises(ModuleExit) as exc,
    ):
        main()
    json.dumps(exc.value.result)  # what the module prints must be JSON
    return exc.value.result
