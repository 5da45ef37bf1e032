# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters of roles/nvidia_lockstep. Docs: plugins/filter/<name>.yml."""

from __future__ import annotations

from ansible_collections.gb10.serving.plugins.module_utils._lockstep.apt import apt_failure_text, simulated_moves


def nvidia_lockstep_apt_failure(result, limit=800):
    result = result if isinstance(result, dict) else {}
    return apt_failure_text(result.get("stdout"), result.get("stderr"), result.get("msg"), int(limit))


def nvidia_lockstep_simulated_moves(stdout):
    return simulated_moves(stdout if isinstance(stdout, str) else "")


class FilterModule:
    def filters(self):
        return {
            "nvidia_lockstep_apt_failure": nvidia_lockstep_apt_failure,
            "nvidia_lockstep_simulated_moves": nvidia_lockstep_simulated_moves,
        }
