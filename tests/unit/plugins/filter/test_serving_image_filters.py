# Copyright: gb10.serving maintainers
# Apache-2.0
"""The serving image role's distribution skip as its tasks call it: hostvars holding what the preflight registered."""

from __future__ import annotations

import base64
import json

from ansible_collections.gb10.serving.plugins.filter.serving_image import FilterModule

LOCAL, NAME, REGISTRY = "gb10/vllm-serving:0123456789abcdef", "gb10/vllm-serving", "registry:5000"
IDENTITY = {"id": "sha256:" + "1" * 64, "layers": ["sha256:" + "3" * 64]}
REF = "registry:5000/gb10/vllm-serving@sha256:" + "2" * 64


def node(record=None, exists=True):
    """A node's registered preflight reads: the image_identity result and the slurp of its record."""
    registered = {"__serving_image_held": {"exists": exists, "identity": IDENTITY if exists else None}}
    if record is not None:
        content = record if isinstance(record, str) else json.dumps(record)
        registered["__serving_image_record"] = {"content": base64.b64encode(content.encode()).decode()}
    else:
        # the preflight skipped the read (no image held) or it failed (no record): no content
        registered["__serving_image_record"] = {"skipped": True}
    return registered


def distributed(hostvars, hosts=("spark-1", "spark-2"), registry=REGISTRY):
    return FilterModule().filters()["serving_image_distributed"](hostvars, list(hosts), LOCAL, registry, NAME)


def test_every_node_holding_its_recorded_image_keeps_the_recorded_reference():
    record = {"image": REF, "local": LOCAL, "id": IDENTITY["id"]}
    assert distributed({"spark-1": node(record), "spark-2": node(record)}) == REF


def test_a_node_without_the_image_an_unreadable_record_or_no_registry_entry_distributes():
    record = {"image": REF, "local": LOCAL, "id": IDENTITY["id"]}
    assert distributed({"spark-1": node(record), "spark-2": node(None, exists=False)}) is None
    assert distributed({"spark-1": node(record), "spark-2": node("{not json")}) is None
    assert distributed({"spark-1": node(record)}, hosts=("spark-1", "spark-3")) is None
    assert distributed({"spark-1": node(record), "spark-2": node(record)}, registry="") is None
