#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Module gb10.serving.toolcall_gate: score tool-calling responses and refuse a model below the gate."""

from __future__ import annotations

DOCUMENTATION = r"""
module: toolcall_gate
short_description: Score a tool-calling evaluation and refuse a model that scores below the gate
description:
  - Pure computation on the control machine over the responses the playbook collected with ansible.builtin.uri
    (plain chat.completion JSON, or the text of an SSE stream whose tool-call arguments arrive in fragments).
  - A case passes when the response is the right well-formed call(s) - name, arguments that parse as a JSON
    object and equal (or contain) the expected ones, parallel calls as a set - or, for a case that needs no
    call, no tool_calls at all.
  - Fails when the candidate's score is below C(threshold), or below the running model's score by more than
    C(margin); the message gives both scores and every failing case.
  - With C(reasoning_response), also judges the reasoning parser by whether the reasoning field holds the text
    before the end-of-thinking marker (not by clean content); a failure is a warning, never a refusal.
options:
  cases:
    description: The evaluation set (files/toolcall_eval/cases.yml).
    type: list
    elements: dict
    required: true
  candidate:
    description: Results of the uri loop against the candidate, each with C(item.id) and C(json) or C(content).
    type: list
    elements: dict
    required: true
  running:
    description: The same for the running model; empty (or only skipped items) when nothing runs to compare with.
    type: list
    elements: dict
    default: []
  threshold:
    description: The lowest acceptable share of passing cases.
    type: float
    default: 0.8
  margin:
    description: How far below the running model's score the candidate may fall.
    type: float
    default: 0.05
  reasoning_response:
    description: A uri result of a reasoning prompt (profiles that set a reasoning parser); omit to skip.
    type: dict
  raw_generation:
    description: The raw generation of the same prompt (e.g. /v1/completions text), when available.
    type: str
  end_marker:
    description: The end-of-thinking marker.
    type: str
    default: "</think>"
extends_documentation_fragment:
  - gb10.serving.read_only
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Apply the tool-calling gate
  gb10.serving.toolcall_gate:
    cases: "{{ __cases }}"
    candidate: "{{ __candidate.results }}"
    running: "{{ __running.results | default([]) }}"
    threshold: 0.8
  delegate_to: localhost
"""

RETURN = r"""
candidate:
  description: score, passed, total, failing (id and reason per failing case), results.
  type: dict
  returned: always
running:
  description: The same for the running model, or null.
  type: dict
  returned: always
gate:
  description: ok, msg, candidate_score, running_score.
  type: dict
  returned: always
reasoning:
  description: ok and warning of the reasoning check, or null when not asked.
  type: dict
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils import _toolcall_eval as te


def responses(results):
    """case id -> the response a uri loop result holds (JSON when parsed, else the body text)."""
    out = {}
    for res in results:
        if res.get("skipped"):
            continue
        cid = (res.get("item") or {}).get("id")
        if cid:
            out[cid] = res.get("json") or res.get("content") or {"error": res.get("msg", "no response")}
    return out


def run(p):
    cases = te.validate_cases(p["cases"])
    cand = te.score(cases, responses(p["candidate"]))
    answered = [r for r in p["running"] if not r.get("skipped")]
    running = te.score(cases, responses(answered)) if answered else None
    verdict = te.gate(cand, p["threshold"], running, p["margin"])
    reasoning = None
    if p["reasoning_response"] is not None:
        body = p["reasoning_response"].get("json") or p["reasoning_response"].get("content") or ""
        try:
            reasoning = te.reasoning_check(body, p["raw_generation"], p["end_marker"])
        except (ValueError, TypeError) as exc:
            reasoning = {"ok": False, "warning": f"reasoning check got no usable response: {exc}"}
    return cand, running, verdict, reasoning


def main():
    module = AnsibleModule(
        argument_spec={
            "cases": {"type": "list", "elements": "dict", "required": True},
            "candidate": {"type": "list", "elements": "dict", "required": True},
            "running": {"type": "list", "elements": "dict", "default": []},
            "threshold": {"type": "float", "default": 0.8},
            "margin": {"type": "float", "default": 0.05},
            "reasoning_response": {"type": "dict"},
            "raw_generation": {"type": "str"},
            "end_marker": {"type": "str", "default": te.DEFAULT_END_MARKER},
        },
        supports_check_mode=True,
    )
    try:
        cand, running, verdict, reasoning = run(module.params)
    except te.CaseError as exc:
        module.fail_json(msg=f"the evaluation set is malformed: {exc}")
    if reasoning and not reasoning["ok"]:
        module.warn(reasoning["warning"])
    result = {"changed": False, "candidate": cand, "running": running, "gate": verdict, "reasoning": reasoning}
    if not verdict["ok"]:
        module.fail_json(msg=verdict["msg"], **result)
    module.exit_json(msg=verdict["msg"], **result)


if __name__ == "__main__":
    main()
