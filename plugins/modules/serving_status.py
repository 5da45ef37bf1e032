#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Module gb10.serving.serving_status: per-node and summed serving status from what each replica reported."""

from __future__ import annotations

DOCUMENTATION = r"""
module: serving_status
short_description: Per-node and summed serving status from each replica's own /metrics, memory and the proxy
description:
  - Pure computation on the control machine over what the status playbook read - each replica's /metrics twice,
    a window apart (tokens per second is the counter's rate over that window, each replica read on its own
    address, never through the proxy), /proc/meminfo, earlyoom's arguments, the lockstep verdict and HAProxy's
    C(show stat) CSV.
options:
  topology:
    description: The plan's topology.
    type: str
    required: true
  model:
    description: The served model name.
    type: str
    required: true
  image:
    description: The serving image reference.
    type: str
    required: true
  window_s:
    description: Seconds between the two /metrics reads.
    type: float
    required: true
  nodes:
    description: >-
      Per node C({health_ok, metrics_first, metrics_second, meminfo, earlyoom_default, lockstep}) with the
      /metrics texts ('' when unread), /proc/meminfo and /etc/default/earlyoom texts and the lockstep verdict.
    type: dict
    required: true
  show_stat:
    description: HAProxy C(show stat) CSV; empty when there is no proxy.
    type: str
    default: ""
  backend:
    description: The proxy's backend of the replicas.
    type: str
    default: vllm
  replicas:
    description: Replicas as C({node, address, port}), for the Prometheus scrape targets.
    type: list
    elements: dict
    default: []
extends_documentation_fragment:
  - gb10.serving.read_only
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Summarise
  gb10.serving.serving_status:
    topology: replicas
    model: sim-model
    image: "registry:5000/gb10/vllm@sha256:..."
    window_s: 60
    nodes: "{{ __status_nodes }}"
    show_stat: "{{ __status_show_stat.content | default('') }}"
  delegate_to: localhost
"""

RETURN = r"""
nodes:
  description: One entry per node (health, running, waiting, kv_cache_percent, tokens_per_s, mem_available_mib,
    earlyoom_sigterm_mib, margin_mib, lockstep, proxy).
  type: list
  returned: always
total:
  description: Summed view (healthy, running, waiting, tokens_per_s, tightest_margin_mib, proxy_up).
  type: dict
  returned: always
lines:
  description: The status as printable lines.
  type: list
  returned: always
scrape_targets:
  description: Prometheus file_sd entries, one per replica on its own address.
  type: list
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils import _bench, _status


def _metrics(text):
    return _bench.parse_metrics(text) if text else {}


def main():
    module = AnsibleModule(
        argument_spec={
            "topology": {"type": "str", "required": True},
            "model": {"type": "str", "required": True},
            "image": {"type": "str", "required": True},
            "window_s": {"type": "float", "required": True},
            "nodes": {"type": "dict", "required": True},
            "show_stat": {"type": "str", "default": ""},
            "backend": {"type": "str", "default": "vllm"},
            "replicas": {"type": "list", "elements": "dict", "default": []},
        },
        supports_check_mode=True,
    )
    p = module.params
    try:
        view = _status.backend_view(_status.parse_show_stat(p["show_stat"]), p["backend"]) if p["show_stat"] else {}
        nodes = [
            _status.node_status(
                name,
                bool(n.get("health_ok")),
                _metrics(n.get("metrics_first")),
                _metrics(n.get("metrics_second")),
                p["window_s"],
                _status.meminfo_mib(n.get("meminfo", "")),
                _status.sigterm_percent(n.get("earlyoom_default", "")),
                n.get("lockstep"),
                view.get(name),
            )
            for name, n in sorted(p["nodes"].items())
        ]
    except ValueError as exc:
        module.fail_json(msg=f"serving_status: {exc}")
    total = _status.summary(nodes)
    lines = _status.render_text(p["topology"], p["model"], p["image"], nodes, total)
    module.exit_json(
        changed=False, nodes=nodes, total=total, lines=lines, scrape_targets=_status.scrape_targets(p["replicas"])
    )


if __name__ == "__main__":
    main()
