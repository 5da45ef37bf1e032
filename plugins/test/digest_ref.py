# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Test gb10.serving.digest_ref: the plan's digest rule, for every template that must refuse a tag."""

from __future__ import annotations

from ansible_collections.gb10.serving.plugins.module_utils._plan import DIGEST_REF_RE

DOCUMENTATION = r"""
name: digest_ref
short_description: Whether an image reference is repository@sha256:<64 hex>, without a tag
version_added: 0.1.1
author: gb10.serving maintainers
description:
  - True for C(registry:5000/gb10/vllm@sha256:<64 lowercase hex>); false for a tag, a tag plus a digest, an empty
    value or anything that is not a string.
  - The same rule the serving plan applies to a profile's C(image.ref) (plugins/module_utils/_plan/rules_model.py),
    so a role cannot let through what the plan refuses.
options:
  _input:
    description: The image reference.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Refuse a tag
  ansible.builtin.assert:
    that: image is gb10.serving.digest_ref
"""

RETURN = r"""
_value:
  description: Whether the reference is pinned by digest.
  type: bool
"""


def digest_ref(value):
    return isinstance(value, str) and DIGEST_REF_RE.match(value) is not None


class TestModule:
    def tests(self):
        return {"digest_ref": digest_ref}
