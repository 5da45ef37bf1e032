#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Module gb10.serving.bench_sweep: a bounded concurrency sweep per replica and through the proxy."""

from __future__ import annotations

DOCUMENTATION = r"""
module: bench_sweep
short_description: Concurrency sweep per replica and through the proxy, with warm-up excluded and a recommendation
description:
  - Run on the control machine. For every target (each replica's own address:port, and the proxy) and every
    prompt kind, sends a bounded number of streaming chat requests at each concurrency and measures tokens per
    second, requests per minute and time to first token.
  - The first request after any start is a warm-up (kernels compile on it), so one is sent to every target alone
    first and never counted.
  - Reads vLLM's counters from each replica's own /metrics before and after each run and sums them; refuses a
    metrics target that is the proxy (consecutive reads through it come from different replicas).
  - Writes C(bench.md) (Markdown table and recommendation), C(bench.json) and, when matplotlib is installed,
    C(bench.png) (tokens per second and TTFT against concurrency, one line per replica and one for the proxy).
options:
  model:
    description: The served model name.
    type: str
    required: true
  replicas:
    description: Replicas, each C({name, url}) with the replica's own base URL (http://address:port).
    type: list
    elements: dict
    required: true
  proxy_url:
    description: Base URL of the proxy; empty to sweep the replicas only.
    type: str
    default: ""
  api_key:
    description: "The site's API key (gb10_api_key), sent as C(Authorization: Bearer <key>); empty: none."
    type: str
    default: ""
  ca_path:
    description:
      - A PEM of CA certificates on the control machine that an https O(proxy_url) is verified against (the plan's
        C(api.ca), the proxy role's C(proxy_tls_ca)); empty, the system's trust store.
      - Certificates and host names are always verified.
    type: path
    default: ""
  concurrency:
    description: Concurrency levels.
    type: list
    elements: int
    default: [1, 4, 8, 12, 16]
  prompts:
    description: Prompt kinds and their size in tokens.
    type: dict
    default: {short: 64, long: 4096}
  weights:
    description: Weight of each prompt kind in the traffic mix (default equal).
    type: dict
    default: {}
  requests_per_worker:
    description: Requests each concurrent worker sends per run (a run sends concurrency x this).
    type: int
    default: 2
  max_tokens:
    description: max_tokens of each request.
    type: int
    default: 128
  request_timeout:
    description: Seconds one request may take.
    type: int
    default: 300
  run_deadline:
    description: Seconds after which a run sends no new request.
    type: int
    default: 120
  tolerance:
    description: A concurrency whose tokens/s falls below a lower one's by more than this share is degraded.
    type: float
    default: 0.05
  ttft_limit:
    description: Seconds of TTFT p90 above which a concurrency is not recommended; 0 for no limit.
    type: float
    default: 0
  report_dir:
    description: Directory on the control machine for bench.md, bench.json and bench.png.
    type: path
    required: true
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: partial
    details: >-
      A real run sends load to the endpoints and writes the report (changed). In check mode it sends no
      request and writes nothing: it returns skipped, changed false and no results, so it does not
      predict the run.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
    details: The report files it writes are returned as results, not as a diff.
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Sweep both replicas and the proxy
  gb10.serving.bench_sweep:
    model: sim-model
    replicas:
      - {name: spark-1, url: "http://10.77.0.11:8000"}
      - {name: spark-2, url: "http://10.77.0.12:8000"}
    proxy_url: "https://10.77.0.10:8080"
    ca_path: /etc/gb10/site-ca.pem
    report_dir: /tmp/gb10-bench
  delegate_to: localhost
"""

RETURN = r"""
rows:
  description: One row per target, prompt kind and concurrency with requests, errors, tokens_per_s,
    requests_per_min, ttft_p50_s, ttft_p90_s, metrics_tokens_per_s and warmups_excluded.
  type: list
  returned: success
recommendations:
  description: Per replica (and the proxy), the concurrency to configure, why, and the concurrencies excluded.
  type: dict
  returned: success
table:
  description: The Markdown report.
  type: str
  returned: success
chart:
  description: Path of the PNG, or empty when matplotlib is not installed (chart_note says so).
  type: str
  returned: success
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils import _bench, _loadgen


def _metrics(replicas, timeout):
    out = {}
    for rep in replicas:
        try:
            out[rep["name"]] = _bench.parse_metrics(_loadgen.read_metrics(rep["url"], timeout))
        except (OSError, ValueError):
            out[rep["name"]] = {}
    return out


def sweep(p):
    replicas = p["replicas"]
    proxy = p["proxy_url"].rstrip("/")
    _bench.check_metrics_targets([r["url"].rstrip("/") for r in replicas], [proxy] if proxy else [])
    targets = [(r["name"], r["url"], [r]) for r in replicas] + ([("proxy", proxy, replicas)] if proxy else [])
    warmups = [
        _loadgen.warmup(url, p["model"], 16, p["request_timeout"], api_key=p["api_key"], ca_path=p["ca_path"])
        for _name, url, _counted in targets
    ]
    rows = []
    for name, url, counted_replicas in targets:
        for kind, size in sorted(p["prompts"].items()):
            prompt = _loadgen.filler_prompt(size)
            for level in p["concurrency"]:
                before = _metrics(counted_replicas, 10)
                started = time.monotonic()
                records = _loadgen.run(
                    url,
                    p["model"],
                    level,
                    level * p["requests_per_worker"],
                    prompt,
                    p["max_tokens"],
                    p["request_timeout"],
                    p["run_deadline"],
                    api_key=p["api_key"],
                    ca_path=p["ca_path"],
                )
                wall = time.monotonic() - started
                after = _metrics(counted_replicas, 10)
                row = {"target": name, "prompt": kind, "concurrency": level, **_bench.summarize(records)}
                delta = _bench.summed_delta(before, after)
                row["metrics_tokens_per_s"] = round(delta / wall, 2) if delta is not None and wall > 0 else None
                rows.append(row)
    recs = {
        name: _bench.recommend(rows, name, p["weights"] or None, p["tolerance"], p["ttft_limit"] or None)
        for name, _url, _counted in targets
    }
    return rows, recs, warmups


def main():
    module = AnsibleModule(
        argument_spec={
            "model": {"type": "str", "required": True},
            "replicas": {"type": "list", "elements": "dict", "required": True},
            "proxy_url": {"type": "str", "default": ""},
            "api_key": {"type": "str", "default": "", "no_log": True},
            "ca_path": {"type": "path", "default": ""},
            "concurrency": {"type": "list", "elements": "int", "default": list(_bench.DEFAULT_CONCURRENCY)},
            "prompts": {"type": "dict", "default": {"short": 64, "long": 4096}},
            "weights": {"type": "dict", "default": {}},
            "requests_per_worker": {"type": "int", "default": 2},
            "max_tokens": {"type": "int", "default": 128, "no_log": False},
            "request_timeout": {"type": "int", "default": 300},
            "run_deadline": {"type": "int", "default": 120},
            "tolerance": {"type": "float", "default": 0.05},
            "ttft_limit": {"type": "float", "default": 0},
            "report_dir": {"type": "path", "required": True},
        },
        supports_check_mode=True,
    )
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, msg="check mode: no load sent")
    p = module.params
    try:
        rows, recs, warmups = sweep(p)
    except _bench.MetricsSourceError as exc:
        module.fail_json(msg=str(exc))
    os.makedirs(p["report_dir"], exist_ok=True)
    table = _bench.render_markdown(rows, recs)
    with open(os.path.join(p["report_dir"], "bench.md"), "w", encoding="utf-8") as fh:
        fh.write(table)
    with open(os.path.join(p["report_dir"], "bench.json"), "w", encoding="utf-8") as fh:
        json.dump({"rows": rows, "recommendations": recs, "warmups": warmups}, fh, indent=2, sort_keys=True)
    chart, note = "", ""
    try:
        chart = _bench.render_chart(rows, os.path.join(p["report_dir"], "bench.png"))
    except ImportError:
        note = "matplotlib is not installed on the control machine: no chart (pip install matplotlib)"
    module.exit_json(changed=True, rows=rows, recommendations=recs, table=table, chart=chart, chart_note=note)


if __name__ == "__main__":
    main()
