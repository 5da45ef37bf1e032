#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Documentation of gb10.serving.proxy_vip_plan; the work is done by the action plugin of the same name."""

from __future__ import annotations

DOCUMENTATION = r"""
module: proxy_vip_plan
short_description: Plan the floating proxy address (keepalived VRRP, unicast peers) and refuse every violation at once
description:
  - Runs on the controller (an action plugin), so the plan is checked before any node changes.
  - For every node of the proxy group, the unicast source (its C(gb10_fabric_address)), its unicast peers (the
    other proxies' fabric addresses), its VRRP priority (C(proxy_vip_priority), or the group's order - first host
    highest) and the interface the floating address lives on (C(proxy_vip_interface), default the fabric one).
  - Fails with ALL violations, each naming node, rule and fix, when the address is no valid host address, is a
    node's own address, lies outside the subnet of the interface it lands on, the proxy group has fewer than two
    nodes, a node has no fabric address, a priority is outside 1..254, the VRRP router id is outside 1..255, or
    HAProxy binds one concrete address (a backup could not accept on the floating address when it arrives).
  - Interfaces come from C(gb10_stated_facts) and, with O(use_measured=true), from facts gathered by
    M(ansible.builtin.setup) (a host with
    C(gb10_node_figures_prefer=stated), such as a container standing for a GB10, keeps its stated figures).
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: Changes nothing; runs the same in check mode.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
    details: It changes nothing, so there is nothing to diff.
options:
  address:
    description: The floating address (C(proxy_vip_address)).
    type: str
    required: true
  prefix:
    description: Its prefix length, that of the subnet it lands in.
    type: int
    default: 24
  hosts:
    description: The nodes that share the address; defaults to group C(gb10_proxy).
    type: list
    elements: str
  virtual_router_id:
    description: The VRRP router id, 1..255, unique among VRRP routers of the network.
    type: int
    default: 51
  advert_int:
    description: Seconds between VRRP adverts.
    type: float
    default: 1.0
  bind_address:
    description: HAProxy's client bind address (C(gb10_proxy_bind_address)); must be a wildcard.
    type: str
    default: "*"
  use_measured:
    description: Use the interfaces gathered by M(ansible.builtin.setup) on the nodes where present.
    type: bool
    default: true
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Plan the floating address of the proxies
  gb10.serving.proxy_vip_plan:
    address: 192.168.1.20
    prefix: 24
  run_once: true
  register: __proxy_vip_plan
"""

RETURN = r"""
plan:
  description: The plan.
  returned: always
  type: dict
  contains:
    address:
      description: The floating address.
      type: str
    prefix:
      description: Its prefix length.
      type: int
    virtual_router_id:
      description: The VRRP router id.
      type: int
    nodes:
      description: Per host, unicast_src_ip, unicast_peers, priority, interface (adverts) and vip_interface.
      type: dict
    violations:
      description: Same as RV(violations).
      type: list
violations:
  description: Every violation found, each with node (or C(all)), rule and message (numbers and fix).
  returned: always
  type: list
  elements: dict
  sample:
    - node: all
      rule: peers
      message: a floating address needs the proxy on two nodes or more; group gb10_proxy has 1 (spark-a) ...
"""
