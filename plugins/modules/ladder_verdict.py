#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Module gb10.serving.ladder_verdict: judge one context rung and say what the climb does next."""

from __future__ import annotations

DOCUMENTATION = r"""
module: ladder_verdict
short_description: Judge one rung of the context ladder against its abort criteria and render the report
description:
  - Pure computation on the control machine over what the context_ladder playbook observed on every node while
    a rung ran - MemAvailable samples, earlyoom lines and kernel lines since the rung started, ssh round trips -
    plus whether serving came up and whether the recall answers pass the recall check (C(recall)).
  - A rung trips on MemAvailable below C(mem_abort_mib) on any node, any earlyoom kill, a kernel OOM or UVM line,
    or a degraded ssh round trip. A rung the serving plan refused (C(plan_violations)) trips on the plan's own
    words alone (it was never applied, so nothing was measured and there is nothing to restore).
  - Returns the next step - climb, restore the last rung that held, stop (the plan refused the rung, and the rung
    below still runs as it was) or done - and the report as data and Markdown.
options:
  profile:
    description: The serving profile climbed (for the report).
    type: str
    required: true
  planned:
    description: All rungs, climbing.
    type: list
    elements: int
    required: true
  previous:
    description: Verdicts of the rungs already climbed (this module's C(result) of each).
    type: list
    elements: dict
    default: []
  rung:
    description: The rung just tried.
    type: int
    required: true
  nodes:
    description: Per node C({mem_available_mib, earlyoom_lines, kernel_lines, ssh_rtt_s, ssh_baseline_s}).
    type: dict
    required: true
  serving_ok:
    description: Whether serving became healthy with this max length.
    type: bool
    required: true
  serving_errors:
    description: Per node, the engine's error lines from its journal where serving did not come up (reported as
      the reason of the trip).
    type: dict
    default: {}
  plan_violations:
    description: The serving plan's violations for this rung (the serving_plan module's C(violations), each
      with node, rule, value and message). Any violation makes the verdict a refusal by the plan, reported in
      the plan's words, whatever the other options say.
    type: list
    elements: dict
    default: []
  recall_answers:
    description: The recall answers, one per replica (an error text where a request failed). Empty when no
      answer came.
    type: list
    elements: str
    default: []
  needle:
    description: What the answer must hold (C(recall=needle)).
    type: str
    required: true
  recall:
    description:
      - What a recall answer is held to (the serving plan's C(context_recall)).
      - C(needle) every answer must hold C(needle), for a model that follows the question.
      - C(prompt_tokens) every replica's C(recall_prompt_tokens) must reach the prompt's word count (the rung
        less C(reserve_tokens), at least one token each), so the engine took the whole prompt in. For a model
        that does not follow the question (a base model, a randomly initialised checkpoint); it proves the
        engine serves the rung, not that the model recalls.
    type: str
    choices: [needle, prompt_tokens]
    default: needle
  recall_prompt_tokens:
    description: Each replica's C(usage.prompt_tokens), in the order of C(recall_answers) (0 where the answer
      has none).
    type: list
    elements: int
    default: []
  reserve_tokens:
    description: The tokens the recall prompt left free of the rung (gb10.serving.recall_prompt's).
    type: int
    default: 1024
  mem_abort_mib:
    description: MemAvailable (MiB) below which a rung trips.
    type: int
    default: 4096
  ssh_limit_s:
    description: Round trip (s) through the connection (an ansible.builtin.ping, timed) above which a rung trips.
    type: float
    default: 10.0
  ssh_factor:
    description: ssh round trip above this multiple of its baseline trips a rung.
    type: float
    default: 5.0
extends_documentation_fragment:
  - gb10.serving.read_only
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Judge the rung
  gb10.serving.ladder_verdict:
    profile: "{{ serving_profile }}"
    planned: [32768, 131072, 262144]
    previous: "{{ __context_ladder_results }}"
    rung: 131072
    nodes: "{{ __context_ladder_observed }}"
    serving_ok: true
    recall_answers: ["4711", "4711"]
    needle: "4711"
  delegate_to: localhost

- name: Judge a rung the plan refused (never applied)
  gb10.serving.ladder_verdict:
    profile: "{{ serving_profile }}"
    planned: [32768, 131072, 262144]
    previous: "{{ __context_ladder_results }}"
    rung: 262144
    nodes: {}
    serving_ok: false
    plan_violations: "{{ __context_ladder_rung_plan.violations }}"
    needle: "4711"
  delegate_to: localhost
"""

RETURN = r"""
result:
  description: rung, tripped, refused_by (plan, engine or null), reasons, measurements per node.
  type: dict
  returned: always
next:
  description: action (climb, restore, stop or done), rung, working.
  type: dict
  returned: always
report:
  description: The whole climb so far as data (YAML-able).
  type: dict
  returned: always
markdown:
  description: The report as a Markdown table.
  type: str
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils import _ladder


def main():
    module = AnsibleModule(
        argument_spec={
            "profile": {"type": "str", "required": True},
            "planned": {"type": "list", "elements": "int", "required": True},
            "previous": {"type": "list", "elements": "dict", "default": []},
            "rung": {"type": "int", "required": True},
            "nodes": {"type": "dict", "required": True},
            "serving_ok": {"type": "bool", "required": True},
            "serving_errors": {"type": "dict", "default": {}},
            "plan_violations": {"type": "list", "elements": "dict", "default": []},
            "recall_answers": {"type": "list", "elements": "str", "default": []},
            "needle": {"type": "str", "required": True, "no_log": False},
            "recall": {"type": "str", "choices": list(_ladder.RECALL_CHECKS), "default": "needle"},
            "recall_prompt_tokens": {"type": "list", "elements": "int", "default": [], "no_log": False},
            "reserve_tokens": {"type": "int", "default": _ladder.DEFAULT_RESERVE_TOKENS, "no_log": False},
            "mem_abort_mib": {"type": "int", "default": _ladder.DEFAULT_MEM_ABORT_MIB},
            "ssh_limit_s": {"type": "float", "default": _ladder.DEFAULT_SSH_LIMIT_S},
            "ssh_factor": {"type": "float", "default": _ladder.DEFAULT_SSH_FACTOR},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        planned = _ladder.rungs(p["planned"])
    except _ladder.LadderError as exc:
        module.fail_json(msg=str(exc))
    limits = {k: p[k] for k in ("mem_abort_mib", "ssh_limit_s", "ssh_factor")}
    result = _ladder.evaluate_rung(
        p["rung"],
        p["nodes"],
        p["serving_ok"],
        p["recall_answers"],
        p["needle"],
        p["serving_errors"],
        plan_violations=p["plan_violations"],
        recall=p["recall"],
        prompt_tokens=p["recall_prompt_tokens"],
        reserve_tokens=p["reserve_tokens"],
        **limits,
    )
    results = [*p["previous"], result]
    rep = _ladder.report(p["profile"], planned, results, limits, recall=p["recall"])
    module.exit_json(
        changed=False,
        result=result,
        next=_ladder.next_step(planned, results),
        report=rep,
        markdown=_ladder.render_markdown(rep),
    )


if __name__ == "__main__":
    main()
