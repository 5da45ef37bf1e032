#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Module gb10.serving.image_identity: the content identity of a local image, optionally compared."""

from __future__ import annotations

DOCUMENTATION = r"""
module: image_identity
short_description: Read a local image's content identity (config digest and layer digests) and compare it
description:
  - Reads C(docker image inspect) of O(name) on the node and returns its Id (the config digest) and layer digests.
    RepoDigests are not used, as they do not survive C(docker save) / C(docker load).
  - With O(require_digest), refuses a O(name) that is not C(repository@sha256:<64 hex>) before looking.
  - With O(expected), fails when the node holds a different image under O(name), naming the node and both Ids.
options:
  name:
    description: The image reference on this node.
    type: str
    required: true
  require_digest:
    description: Refuse O(name) unless it is pinned by digest.
    type: bool
    default: false
  what:
    description: How the operator calls O(name) in messages (the variable or profile key).
    type: str
    default: image
  node:
    description: The node's inventory name, for messages.
    type: str
    default: this node
  expected:
    description: An identity (C({id, layers})) the image must have when present; null to only read.
    type: dict
  expected_node:
    description: The node O(expected) was read from, for messages.
    type: str
    default: the reference node
  docker:
    description: The docker client.
    type: str
    default: docker
extends_documentation_fragment:
  - gb10.serving.read_only
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Read the serving image's identity
  gb10.serving.image_identity:
    name: gb10/vllm-serving:5d0c2a8e4b1f7c3a
  register: __identity
"""

RETURN = r"""
exists:
  description: Whether the node holds an image under O(name).
  type: bool
  returned: always
identity:
  description: C({id, layers}) of the image, null when absent.
  type: dict
  returned: always
labels:
  description: The image's labels.
  type: dict
  returned: always
"""

import json

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils import _serving_image as si


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            require_digest=dict(type="bool", default=False),
            what=dict(type="str", default="image"),
            node=dict(type="str", default="this node"),
            expected=dict(type="dict"),
            expected_node=dict(type="str", default="the reference node"),
            docker=dict(type="str", default="docker"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["require_digest"]:
        problem = si.ref_problem(p["name"], p["what"])
        if problem:
            module.fail_json(msg=problem)
    rc, out, _err = module.run_command([p["docker"], "image", "inspect", p["name"]])
    inspect = json.loads(out)[0] if rc == 0 and out.strip() else None
    identity = si.identity_of(inspect)
    labels = ((inspect or {}).get("Config") or {}).get("Labels") or {}
    result = dict(changed=False, exists=inspect is not None, identity=identity, labels=labels)
    problem = si.identity_problem(p["node"], p["name"], identity, p["expected"], p["expected_node"])
    if problem:
        module.fail_json(msg=problem, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
