#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Documentation of gb10.serving.serving_plan; the work is done by the action plugin of the same name."""

from __future__ import annotations

DOCUMENTATION = r"""
module: serving_plan
short_description: Build the serving plan of a named serving profile and refuse every violation at once
description:
  - Runs on the controller (an action plugin), so a plan can be reviewed before any node is reachable.
  - Turns the chosen serving profile and every node's figures into the exact C(vllm serve) argv, container
    environment and Ray start command per node, and the memory table per node (total, budget at the node's
    share, resident weights, drafter, activation reserve, KV cache, headroom, KV tokens).
  - Checks the profile against the field reports' pitfalls (image by digest, exact flags of the pinned vLLM
    release with no prefix abbreviation, values the release's parser converts, registered tool-call and reasoning
    parser names, valid JSON values, text-only modality limits, tool parser, context length within the model's
    C(max_position_embeddings), MTP speculative decoding only on a checkpoint with MTP layers, local
    snapshot path and served model name, Ray/NCCL/GLOO on the fabric for tensor-parallel, memory headroom on
    every node on its own figures, MAX_JOBS forwarded) and fails with ALL violations, each naming node, rule,
    value and fix.
  - In tensor-parallel, every rank is judged at the one share vLLM applies to all of them (the head's
    C(--gpu-memory-utilization)); a per-node value on a Ray worker is refused; the group's KV tokens are the
    smallest rank's; the model's stated attention and KV heads must split over the group's ranks.
  - Node figures come from the host variable C(gb10_stated_facts); with O(use_measured=true) from facts gathered
    by M(ansible.builtin.setup) where present (a host with
    C(gb10_node_figures_prefer=stated), such as a container standing for a GB10, keeps its stated figures).
    The plan says per node and figure where each came from.
  - See C(docs/serving-profile.md) for the profile schema.
options:
  profile:
    description: The name of the serving profile (the required extra var C(serving_profile)). Unset fails.
    type: str
  profiles:
    description: The inventory's C(serving_profiles); defaults to the variable of that name.
    type: dict
  hosts:
    description: The nodes to plan for; defaults to group C(gb10_nodes).
    type: list
    elements: str
  ray_head:
    description: The tensor-parallel head; defaults to the first host of group C(gb10_ray_head).
    type: str
  ray_workers:
    description: The tensor-parallel workers; defaults to group C(gb10_ray_workers).
    type: list
    elements: str
  fabric_cidr:
    description: The fabric subnet; defaults to C(gb10_fabric_cidr) of the first node.
    type: str
  use_measured:
    description: Use the facts gathered by M(ansible.builtin.setup) on the nodes where present.
    type: bool
    default: false
  image_catalog_dir:
    description:
      - The folder on the control machine that holds the vLLM option catalogs the serving-image gate built from an
        image's own parser (roles/serving_image), searched after the collection's own catalogs.
      - Defaults to C(gb10_vllm_catalog_dir) of the first node, else roles/gb10's default.
      - A release with a catalog in neither plans with its vllm_options unchecked (C(vllm_catalog.source=pending)),
        which the roles that start vLLM refuse; the gate builds the catalog and plans again.
    type: path
extends_documentation_fragment:
  - gb10.serving.read_only
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Plan the chosen profile from the inventory's stated figures
  gb10.serving.serving_plan:
    profile: "{{ serving_profile }}"
    profiles: "{{ serving_profiles }}"
  register: __serving_plan

- name: Plan with the figures measured on the nodes
  gb10.serving.serving_plan:
    profile: "{{ serving_profile }}"
    use_measured: true
"""

RETURN = r"""
plan:
  description: The whole plan.
  returned: always
  type: dict
  contains:
    profile:
      description: The profile's name.
      type: str
    topology:
      description: C(replicas) or C(tensor_parallel).
      type: str
    image:
      description: The image reference, by digest.
      type: str
    vllm_catalog:
      description: >-
        The option catalog vllm_options were checked against: version, source (C(collection), C(image): built by the
        serving-image gate from the image's own parser, or C(pending): none yet, nothing checked) and path.
      type: dict
    tensor_parallel_size:
      description: Ranks in the tensor-parallel group (1 for replicas).
      type: int
    nodes:
      description: >-
        Per host: role (replica, ray_head, ray_worker), argv (empty on a Ray worker), env, ray_start, memory
        (the memory table), snapshot_path and container_snapshot_path, facts_source and facts_measured.
      type: dict
    group:
      description: >-
        Tensor-parallel only (null for replicas): gpu_memory_utilization (the one share of every rank) and set_by
        (where it is set), ranks_judged, kv_cache_gib, kv_tokens and kv_tokens_ranks (the smallest rank's: what
        vLLM serves with), requests_at_full_context, tightest_node and headroom_gib, and heads (num_heads,
        num_kv_heads, tensor_parallel_size, checked, fit).
      type: dict
    ray:
      description: >-
        Tensor-parallel only (null for replicas): Ray's fence. auth (token or disabled; the mode reaches every
        rank's env as RAY_AUTH_MODE, the token never the plan), firewall (whether roles/fabric_firewall fences the
        ports), ports (every Ray port by name, fixed in ray_start), worker_ports ([min, max]), peers (the group's
        fabric addresses, the only sources let in) and listen (per host, the single ports Ray listens on).
      type: dict
    violations:
      description: Same as RV(violations).
      type: list
plan_text:
  description: The plan as readable text, one block per node (argv, env, Ray start, memory table), then violations.
  returned: always
  type: str
violations:
  description: Every violation found, each with node (or C(all)), rule, value and message (numbers and fix).
  returned: always
  type: list
  elements: dict
  sample:
    - node: all
      rule: vllm_flag_abbreviated
      value: --kv-cache-memory
      message: --kv-cache-memory is not an option of vLLM 0.32.0, only a prefix of --kv-cache-memory-bytes ...
"""
