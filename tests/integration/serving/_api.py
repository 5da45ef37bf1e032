# Copyright: gb10.serving maintainers
# Apache-2.0
"""The simulation's API key (issue 18: inventories/sim/group_vars/all/security.yml, gb10_api_key): every request the
suite sends to a replica's /v1 or through the proxy carries it, as every request of the collection does."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

SECURITY = Path(__file__).resolve().parents[3] / "inventories" / "sim" / "group_vars" / "all" / "security.yml"
_SECURITY = yaml.safe_load(SECURITY.read_text())
API_KEY = _SECURITY["gb10_api_key"]
# The canary serving secret every converge of the simulation writes to secrets.env (and nowhere else).
CANARY = _SECURITY["serving_secrets"]["GB10_CANARY"]


def api_headers(**more):
    """JSON request headers with ``Authorization: Bearer <the simulation's key>``."""
    return {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}", **more}


def replica_counter(url, name):
    """A counter of the replica at ``url`` from its own /metrics, every label set summed (seed 002: never through
    the proxy)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    )
