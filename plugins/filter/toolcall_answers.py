# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters of the tool-calling gate. Docs: plugins/filter/<name>.yml."""

from __future__ import annotations

from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gb10.serving.plugins.module_utils._deferred import module_utils

_toolcall_eval = module_utils("_toolcall_eval")


def toolcall_request(case, model, stream=False, max_tokens=512):
    # One body for playbooks/toolcall_gate.yml and the upgrade's gate: a change to how a case is asked lands once.
    # boolean(): an -e stream=false arrives as the string "false", which bool() would call true.
    return _toolcall_eval.request_body(case, str(model), stream=boolean(stream), max_tokens=int(max_tokens))


def toolcall_answers(results):
    if isinstance(results, dict):
        return _toolcall_eval.answer_of(results)
    return _toolcall_eval.answers_of(results)


class FilterModule:
    def filters(self):
        return {"toolcall_answers": toolcall_answers, "toolcall_request": toolcall_request}
