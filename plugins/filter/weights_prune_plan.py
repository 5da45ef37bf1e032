# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filter gb10.serving.weights_prune_plan: which cached revisions of the model are superseded on this node."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gb10.serving.plugins.module_utils._weights.revisions import (
    revisions_in_use,
    superseded_revisions,
)

DOCUMENTATION = r"""
name: weights_prune_plan
short_description: Which revisions of a model in a node's Hugging Face cache are superseded, and which are in use
version_added: 0.1.1
author: gb10.serving maintainers
description:
  - Reads which revisions of O(repo_id) the node's running containers have mounted (its snapshot folder in a
    container's C(Command), as the serving units run C(vllm serve <snapshot>), or the C(Source) of one of its mounts).
  - Then decides, as the prune in the serving image decides again from huggingface_hub's scan of the cache, which
    revisions go; the served revision and one a running container has mounted always stay. With no last-use
    figures here, the choice among the others may differ from the prune's; how many go does not.
  - The role starts the prune's container only where this says something is superseded.
positional: serving, keep, containers, repo_id
options:
  _input:
    description: The names of the model's snapshot folders (C(snapshots/<commit>)) on the node.
    type: list
    elements: str
    required: true
  serving:
    description: The commit the plan serves.
    type: str
    required: true
  keep:
    description: How many revisions stay, the served one included (C(model_weights_keep_revisions)).
    type: int
    required: true
  containers:
    description: The node's running containers, C(containers) of M(community.docker.docker_host_info) with
      C(verbose_output=true).
    type: list
    elements: dict
    required: true
  repo_id:
    description: The model's repository id.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Decide which revisions are superseded
  ansible.builtin.set_fact:
    __plan: >-
      {{ snapshots.files | map(attribute='path') | map('basename') | list
         | gb10.serving.weights_prune_plan(model_weights_revision, 1, host.containers, model_weights_repo_id) }}
"""

RETURN = r"""
_value:
  description: C(keep) and C(prune) (commits), C(why) (a reason per commit), C(in_use) ({commit, container names}).
  type: dict
"""


def weights_prune_plan(snapshots, serving, keep, containers, repo_id):
    try:
        in_use = revisions_in_use(list(containers or []), str(repo_id))
        plan = superseded_revisions({str(name): {} for name in snapshots or []}, str(serving), int(keep), in_use)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError(f"weights_prune_plan: {exc}") from exc
    return {**plan, "in_use": in_use}


class FilterModule:
    def filters(self):
        return {"weights_prune_plan": weights_prune_plan}
