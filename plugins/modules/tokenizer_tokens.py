#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: does the snapshot's tokenizer hold the tokens the served parsers need?"""

from __future__ import annotations

DOCUMENTATION = r"""
module: tokenizer_tokens
short_description: Check a model snapshot's tokenizer for the tokens its vLLM parsers need, before a model load
description:
  - vLLM builds its tool-call and reasoning parsers against the model's tokenizer after the model load and refuses
    to start when one lacks its tokens (for example C(--tool-call-parser llama3_json) on a tokenizer without
    C(<|python_tag|>)). This reads the snapshot's C(tokenizer.json) (the model's vocabulary and its added tokens)
    and C(tokenizer_config.json)'s added tokens, and reports the parsers whose tokens are not there.
  - O(needs) comes from the serving plan (C(tokenizer_needs)), which takes the tokens each parser needs from the vLLM
    release's flag catalog.
  - A snapshot without C(tokenizer.json), or with a C(tekken.json) that vLLM may load instead, is not checked
    (C(checked=false) and the reason).
  - With O(fail_missing=true) the task fails with a message naming the node, the parser, the tokens and the fix.
version_added: 0.1.0
extends_documentation_fragment:
  - gb10.serving.node
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: It only reads; it never changes anything.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
author:
  - gb10.serving maintainers (!UNKNOWN)
options:
  snapshot_path:
    description: The snapshot folder vLLM serves from.
    type: path
    required: true
  needs:
    description: What each parser needs, as the plan gives it.
    type: list
    elements: dict
    required: true
    suboptions:
      option:
        description: The vLLM option that names the parser.
        type: str
        required: true
      parser:
        description: The parser's name.
        type: str
        required: true
      tokens:
        description: The tokens it needs.
        type: list
        elements: str
        required: true
  fail_missing:
    description: Fail the task when a token is missing.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Refuse parsers whose tokens the model's tokenizer lacks
  gb10.serving.tokenizer_tokens:
    node: "{{ inventory_hostname }}"
    snapshot_path: "{{ model_weights_snapshot_path }}"
    needs:
      - {option: --tool-call-parser, parser: llama3_json, tokens: ["<|python_tag|>"]}
    fail_missing: true
"""

RETURN = r"""
checked:
  description: Whether the tokenizer was read (false for a snapshot without tokenizer.json, or with tekken.json).
  type: bool
  returned: always
source:
  description: The file read, or why none was.
  type: str
  returned: always
missing:
  description: The entries of O(needs) whose tokens the tokenizer lacks, each with only the missing tokens.
  type: list
  elements: dict
  returned: always
msg:
  description: What is missing, on which node, and the fix; or that every token is there; or why nothing was read.
  type: str
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils import _tokenizer


def main():
    module = AnsibleModule(
        argument_spec={
            "node": {"type": "str", "required": True},
            "snapshot_path": {"type": "path", "required": True},
            "needs": {
                "type": "list",
                "elements": "dict",
                "required": True,
                "options": {
                    "option": {"type": "str", "required": True},
                    "parser": {"type": "str", "required": True},
                    "tokens": {"type": "list", "elements": "str", "required": True, "no_log": False},
                },
            },
            "fail_missing": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    params = module.params
    tokens, source = _tokenizer.read(params["snapshot_path"])
    result = {"changed": False, "checked": tokens is not None, "source": source, "missing": []}
    if tokens is None:
        module.exit_json(msg=f"{params['node']}: the parsers' tokens were not checked: {source}", **result)
    result["missing"] = _tokenizer.missing(params["needs"], tokens)
    if not result["missing"]:
        named = ", ".join(f"{need['option']} {need['parser']}" for need in params["needs"]) or "no parser"
        module.exit_json(msg=f"{params['node']}: {source} holds every token {named} needs", **result)
    msg = _tokenizer.describe(params["node"], params["snapshot_path"], result["missing"])
    if params["fail_missing"]:
        module.fail_json(msg=msg, **result)
    module.exit_json(msg=msg, **result)


if __name__ == "__main__":
    main()
