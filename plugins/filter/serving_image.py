# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters of the serving image role (documentation: plugins/filter/<filter name>.yml)."""

from __future__ import annotations

from ansible_collections.gb10.serving.plugins.module_utils import _serving_image_inputs


def serving_image_input_problems(extra_pins, ray_version, index_url=""):
    return _serving_image_inputs.input_problems(ray_version, dict(extra_pins or {}), index_url or "")


class FilterModule:
    def filters(self):
        return {"serving_image_input_problems": serving_image_input_problems}
