# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The attributes every module that only reads or computes shares (their check/diff behaviour is the same)."""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: Reads or computes only, so it runs the same in check mode.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
    details: It changes nothing, so there is nothing to diff.
"""
