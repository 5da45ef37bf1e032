# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters of roles/memory_guard: the node's truths read back (issue 19, item 7). Docs: plugins/filter/<name>.yml."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gb10.serving.plugins.module_utils import _earlyoom


def memory_guard_swappiness_verdict(kernel_text, node, intended, applied, sysctl_file):
    try:
        return _earlyoom.swappiness_verdict(node, kernel_text, intended, bool(applied), sysctl_file)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"memory_guard_swappiness_verdict: {node}: {kernel_text!r}: {exc}") from exc


def memory_guard_oom_verdict(score_text, node, unit, main_pid, pid1_status, required):
    try:
        return _earlyoom.oom_protection_verdict(node, unit, main_pid, score_text, pid1_status, bool(required))
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"memory_guard_oom_verdict: {node} {unit}: {score_text!r}: {exc}") from exc


class FilterModule:
    def filters(self):
        return {
            "memory_guard_swappiness_verdict": memory_guard_swappiness_verdict,
            "memory_guard_oom_verdict": memory_guard_oom_verdict,
        }
