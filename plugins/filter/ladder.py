"""Filters of the context ladder: recall_prompt (the long-context request) and ladder_observations."""

from __future__ import annotations

from ansible_collections.gb10.serving.plugins.module_utils._ladder import recall_prompt as _recall_prompt
from ansible_collections.gb10.serving.plugins.module_utils._status import meminfo_mib

DOCUMENTATION = r"""
name: recall_prompt
short_description: A prompt of about N tokens with a needle buried two thirds in, and the question for it
description:
  - Common one-token words as filler, the sentence "The secret code is NEEDLE." two thirds in, then the question.
  - C(reserve_tokens) leaves room for the chat template and the answer.
positional: needle, reserve_tokens
options:
  _input:
    description: The context length to fill, in tokens (the rung).
    type: int
    required: true
  needle:
    description: The code the answer must repeat.
    type: str
    required: true
  reserve_tokens:
    description: Tokens left for the template and the answer.
    type: int
    default: 1024
"""

EXAMPLES = r"""
- name: Build the recall prompt of a rung
  ansible.builtin.set_fact:
    __prompt: "{{ 131072 | gb10.serving.recall_prompt('4711') }}"
"""

RETURN = r"""
_value:
  description: The prompt text.
  type: str
"""


def _lines(result):
    result = result or {}
    return list(result.get("stdout_lines") or [])


def ladder_observations(host_vars):
    """One node's observations during a rung, from the facts the rung's tasks registered on it."""
    baseline = host_vars.get("__ladder_baseline")
    return {
        "mem_available_mib": [meminfo_mib(text)["mem_available_mib"] for text in host_vars.get("__ladder_mem") or []],
        "earlyoom_lines": _lines(host_vars.get("__ladder_earlyoom")),
        "kernel_lines": _lines(host_vars.get("__ladder_kernel")),
        "ssh_rtt_s": [float(v) for v in host_vars.get("__ladder_rtts") or []],
        "ssh_baseline_s": float(baseline) if baseline not in (None, "") else None,
    }


def recall_prompt(tokens, needle, reserve_tokens=1024):
    return _recall_prompt(int(tokens), str(needle), int(reserve_tokens))


class FilterModule:
    def filters(self):
        return {"recall_prompt": recall_prompt, "ladder_observations": ladder_observations}
