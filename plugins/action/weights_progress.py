# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Action plugin gb10.serving.weights_progress: one round of the model_weights progress loop.

Runs on the controller and reads the node's status file with one plain command per look (cat and date), not a
module: a round costs a few milliseconds, so the loop of up to model_weights_timeout_s / interval rounds is cheap
on the node and can be tested at a tiny interval for a thousand rounds.
"""

from __future__ import annotations

import json
import shlex
import time

from ansible.plugins.action import ActionBase

from ansible_collections.gb10.serving.plugins.module_utils._weights.progress import progress_round

_ARGUMENT_SPEC = {
    "node": {"type": "str", "required": True},
    "phase": {"type": "str", "required": True},
    "status": {"type": "path", "required": True},
    "container": {"type": "str", "required": True},
    "interval_s": {"type": "float", "default": 15.0},
    "poll_s": {"type": "float", "default": 3.0},
    "stale_s": {"type": "float", "default": 120.0},
    "round": {"type": "int", "required": True},
    "rounds": {"type": "int", "required": True},
}
_MARK = "--gb10-now--"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True

    def _look(self, path):
        """(status or None, the node's clock): one command, so both come from the same moment on the node."""
        command = f"cat -- {shlex.quote(path)} 2>/dev/null; echo; echo {_MARK}; date +%s"
        answer = self._low_level_execute_command(command, sudoable=True)
        text, _mark, clock = answer.get("stdout", "").rpartition(_MARK)
        try:
            now = float(clock.strip())
        except ValueError as exc:
            raise RuntimeError(f"cannot read the node's clock: {answer.get('stderr') or clock!r}") from exc
        try:
            status = json.loads(text.strip()) if text.strip() else None
        except ValueError:  # caught between the write of the temporary file and its rename: look again
            status = None
        return status, now

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars or {})
        del tmp
        _validation, args = self.validate_argument_spec(argument_spec=_ARGUMENT_SPEC)
        deadline = time.monotonic() + args["interval_s"]
        while True:
            try:
                status, now = self._look(args["status"])
            except RuntimeError as exc:
                return {**result, "failed": True, "ended": True, "msg": f"{args['node']}: {exc}"}
            if (status or {}).get("finished") or time.monotonic() >= deadline:
                break
            time.sleep(max(min(args["poll_s"], deadline - time.monotonic()), 0))
        report = progress_round(
            args["node"],
            args["phase"],
            status,
            now,
            args["round"],
            args["rounds"],
            args["interval_s"],
            args["stale_s"],
            args["container"],
        )
        result.update(report, changed=False)
        return result
