# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters of the context ladder: recall_prompt (the long-context request) and ladder_observations.

Each filter's documentation is its own sidecar file (plugins/filter/<filter name>.yml): ansible-doc reads a
DOCUMENTATION here for every filter of the file, so this file holds none.
"""

from __future__ import annotations

from ansible_collections.gb10.serving.plugins.module_utils._deferred import module_utils

_ladder = module_utils("_ladder")
_status = module_utils("_status")


def _lines(result):
    result = result or {}
    return list(result.get("stdout_lines") or [])


def ladder_observations(host_vars):
    """One node's observations during a rung, from the facts the rung's tasks registered on it."""
    baseline = host_vars.get("__context_ladder_baseline")
    return {
        "mem_available_mib": [
            _status.meminfo_mib(text)["mem_available_mib"] for text in host_vars.get("__context_ladder_mem") or []
        ],
        "earlyoom_lines": _lines(host_vars.get("__context_ladder_earlyoom")),
        "kernel_lines": _lines(host_vars.get("__context_ladder_kernel")),
        "ssh_rtt_s": [float(v) for v in host_vars.get("__context_ladder_rtts") or []],
        "ssh_baseline_s": float(baseline) if baseline not in (None, "") else None,
    }


def recall_prompt(tokens, needle, reserve_tokens=1024):
    return _ladder.recall_prompt(int(tokens), str(needle), int(reserve_tokens))


class FilterModule:
    def filters(self):
        return {"recall_prompt": recall_prompt, "ladder_observations": ladder_observations}
