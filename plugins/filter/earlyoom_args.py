# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filter gb10.serving.earlyoom_args: earlyoom arguments that keep the killer armed, with the arithmetic."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gb10.serving.plugins.module_utils._earlyoom import (
    ThresholdError,
    build_args,
)

DOCUMENTATION = r"""
name: earlyoom_args
short_description: earlyoom arguments from thresholds in percent or GiB, refusing combinations that disarm it
version_added: 0.1.0
author: gb10.serving maintainers
description:
  - Converts SIGTERM/SIGKILL thresholds given as a percent of MemTotal (C(4%)) or a size (C(4.9GiB)) into
    earlyoom's C(-m TERM,KILL), always giving both values explicitly.
  - Makes the swap side always true (C(-s 100,100)) when vm.swappiness is 0 or there is no swap, because earlyoom
    signals only when memory AND swap are both low.
  - Returns C(problems), a list of reasons the configuration would never fire; empty when armed.
positional: mem_total_mib
options:
  _input:
    description: A mapping with sigterm, sigkill, swappiness, swap_total_mib and optional swap_sigterm_percent,
      swap_sigkill_percent, report_interval, prefer, avoid.
    type: dict
    required: true
  mem_total_mib:
    description: MemTotal of the node as earlyoom will read it, in MiB.
    type: int
    required: true
"""

EXAMPLES = r"""
- name: Compute earlyoom's arguments
  ansible.builtin.set_fact:
    __memory_guard_earlyoom: "{{ {'sigterm': '4%', 'sigkill': '2%', 'swappiness': 0, 'swap_total_mib': 0}
      | gb10.serving.earlyoom_args(ansible_facts.memtotal_mb) }}"
"""

RETURN = r"""
_value:
  description: earlyoom's arguments, the thresholds they set, the arithmetic behind them and any refusal.
  type: dict
  contains:
    args:
      description: The arguments, always with C(-r), C(-m TERM,KILL) and C(-s TERM,KILL).
      type: list
      elements: str
    thresholds:
      description: Per signal, the memory and swap percent earlyoom will act on.
      type: dict
    arithmetic:
      description: The thresholds in percent and GiB of MemTotal, for an operator to check.
      type: str
    problems:
      description: Reasons this configuration would never fire; empty when earlyoom is armed.
      type: list
      elements: str
"""


def earlyoom_args(settings, mem_total_mib):
    try:
        return build_args(mem_total_mib=int(mem_total_mib), **settings)
    except (ThresholdError, TypeError) as exc:
        raise AnsibleFilterError(f"earlyoom_args: {exc}") from exc


class FilterModule:
    def filters(self):
        return {"earlyoom_args": earlyoom_args}
