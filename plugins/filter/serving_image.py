# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters of the serving image role (documentation: plugins/filter/<filter name>.yml)."""

from __future__ import annotations

import base64
import binascii
import json

from ansible_collections.gb10.serving.plugins.module_utils._deferred import module_utils

_serving_image = module_utils("_serving_image")
_serving_image_inputs = module_utils("_serving_image_inputs")


def serving_image_nccl_group(hostvars, check, key="__serving_image_nccl", held_only=False):
    """{problems, report}: each rank's recorded NCCL (its image_nccl result, registered as ``key``) held to the plan's
    ``nccl`` entry (issue 39 item 4); nothing to judge in replicas (``check`` None). ``held_only``: node_preflight's
    verdict over the planned image the ranks already hold (a rank without one is left to distribute)."""
    if not check:
        return {"problems": [], "report": []}
    records = {}
    for host in check.get("ranks") or []:
        node = hostvars.get(host) or {}
        registered = (node.get(key) if hasattr(node, "get") else None) or {}
        nccl = registered.get("nccl") if hasattr(registered, "get") else None
        records[host] = nccl if isinstance(nccl, dict) else None
    return {
        "problems": _serving_image.nccl_group_problems(records, check, bool(held_only)),
        "report": [_serving_image.nccl_line(host, records[host]) for host in records],
    }


def serving_image_distributed(hostvars, hosts, local, registry, name):
    """The gated reference to keep without distributing the image again (None: distribute); each node's record and
    identity are what roles/serving_image's preflight registered (``__serving_image_record``, a slurp of
    gb10_gated_image_file, and ``__serving_image_held``)."""
    nodes = {}
    for host in hosts or []:
        node = hostvars.get(host) or {}
        read = (node.get("__serving_image_record") if hasattr(node, "get") else None) or {}
        held = (node.get("__serving_image_held") if hasattr(node, "get") else None) or {}
        try:
            record = json.loads(base64.b64decode(read.get("content") or "")) if read.get("content") else None
        except (binascii.Error, ValueError):
            record = None
        nodes[host] = (record, held.get("identity") if held.get("exists") else None)
    return _serving_image.distributed_ref(nodes, local, registry or "", name)


def serving_image_record_nccl(record, local, identity):
    return _serving_image.record_nccl(record, local, identity)


def serving_image_record_gated(record, local, identity, gate):
    return _serving_image.record_gated(record, local, identity, gate)


def serving_image_input_problems(extra_pins, ray_version, index_url=""):
    return _serving_image_inputs.input_problems(ray_version, dict(extra_pins or {}), index_url or "")


class FilterModule:
    def filters(self):
        return {
            "serving_image_distributed": serving_image_distributed,
            "serving_image_input_problems": serving_image_input_problems,
            "serving_image_nccl_group": serving_image_nccl_group,
            "serving_image_record_gated": serving_image_record_gated,
            "serving_image_record_nccl": serving_image_record_nccl,
        }
