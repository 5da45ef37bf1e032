# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters of the maintenance drain (playbooks/drain.yml) and the upgrade's answer check (roles/upgrade_node).

The logic is in module_utils/_drain and module_utils/_answer_check; each filter's docs are its sidecar file
(plugins/filter/<filter name>.yml).
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

from ansible_collections.gb10.serving.plugins.module_utils._deferred import module_utils

_answer_check = module_utils("_answer_check")
_drain = module_utils("_drain")


def drain_verdict(servers, views, force=False):
    try:
        names = _drain.server_names(servers)
    except ValueError as err:
        return {
            "ok": False,
            "msg": str(err),
            "names": [],
            "unknown": {},
            "already": [],
            "serving_before": [],
            "serving_after": [],
        }
    result = _drain.verdict(names, {str(k): list(v) for k, v in dict(views).items()}, boolean(force))
    return dict(result, names=names)


def removal_verdict(servers, nodes, serving_hosts, proxies, monitoring, topology, force=False):
    try:
        names = _drain.server_names(servers)
    except ValueError as err:
        return {"ok": False, "msg": str(err).replace("drain_servers", "remove_node"), "names": [], "remaining": []}
    result = _drain.removal_verdict(
        names, list(nodes), list(serving_hosts), list(proxies), list(monitoring), str(topology), boolean(force)
    )
    return dict(result, names=names)


def answer_check_request(prompt, model, max_tokens):
    return _answer_check.request(str(model), str(prompt), int(max_tokens))


def answer_check_answers(results):
    """One answer() per uri result of a loop (status and json only: the request, with its key, is left out)."""
    return [_answer_check.answer(int(r.get("status", -1)), r.get("json")) for r in list(results)]


def answer_check_reference(candidate_root, serving, serving_root, recorded, settings):
    settings = dict(settings)
    key = _answer_check.record_key(candidate_root, settings)
    found = dict(recorded or {}).get(key)
    chosen = _answer_check.reference(candidate_root or None, serving or None, serving_root or None, found is not None)
    return dict(chosen, key=key, answers=found if chosen["kind"] == "recorded" else None)


def answer_check_verdict(candidate, reference_answers, prompts, tolerance, candidate_name, reference_name):
    try:
        return _answer_check.verdict(
            list(prompts),
            list(candidate),
            list(reference_answers),
            int(tolerance),
            str(candidate_name),
            str(reference_name),
        )
    except ValueError as err:
        raise AnsibleFilterError(str(err)) from err


class FilterModule:
    def filters(self):
        return {
            "drain_verdict": drain_verdict,
            "removal_verdict": removal_verdict,
            "answer_check_request": answer_check_request,
            "answer_check_answers": answer_check_answers,
            "answer_check_reference": answer_check_reference,
            "answer_check_verdict": answer_check_verdict,
        }
