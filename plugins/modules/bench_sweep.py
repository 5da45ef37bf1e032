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
  - The sweep is a list of points (target, prompt kind, concurrency). Each finished point's row is written to the
    state file O(state) when it finishes; a later call with the same inputs measures only the points not recorded
    (a resumed sweep), and one whose inputs differ starts afresh and says which input changed. O(weights),
    O(tolerance) and O(ttft_limit) only shape the recommendation, so changing them re-reads the rows.
  - With O(points) set, a call measures at most that many points and returns one progress line in C(msg)
    (target, prompt kind, concurrency, done/total); looped over C(range(total)) with C(loop_control.break_when)
    on C(ended), the sweep prints a line as each point finishes. The report is written by the call that records
    the last point (or finds them all recorded).
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
  context_length:
    description:
      - The served context in tokens (the plan's C(model.context_length)); a prompt kind that does not fit with
        O(max_tokens) is refused before any load is sent; 0 (unknown) checks nothing.
    type: int
    default: 0
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
  state:
    description: The state file on the control machine that holds the finished points; empty, C(bench-state.json)
      in O(report_dir). Delete it (or set O(fresh)) to measure every point again.
    type: path
    default: ""
  points:
    description: Points to measure in this call at most; 0, every point not yet recorded.
    type: int
    default: 0
  fresh:
    description: Discard the points recorded by an earlier run (another O(run_id)) and measure them all again.
    type: bool
    default: false
  run_id:
    description:
      - The same for every call of one playbook run (the loop's rounds), so that each target gets its warm-up once
        a run and O(fresh) discards an earlier run's points once; empty, each call is a run of its own.
    type: str
    default: ""
  identity:
    description:
      - What the site serves (the serving plan); kept as its hash in the state, so that points measured before a
        change of profile, image or engine arguments are never taken for this site's.
    type: raw
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: partial
    details: >-
      A real run sends load to the endpoints and writes the state and the report (changed). In check mode it
      sends no request and writes nothing: it returns skipped, changed false, ended true and no results, so it
      does not predict the run.
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

- name: The same sweep, a progress line as each point finishes, resumed where an interrupted run stopped
  gb10.serving.bench_sweep:
    model: sim-model
    replicas: "{{ replicas }}"
    report_dir: /tmp/gb10-bench
    points: 1
    run_id: "{{ run_id }}"
  loop: "{{ range(1, 31) | list }}"
  loop_control:
    label: "{{ __sweep.msg | default('point ' ~ item) }}"
    break_when: __sweep.ended | default(true)
  register: __sweep
  delegate_to: localhost
"""

RETURN = r"""
ended:
  description: Whether every point is recorded (the report is written); a loop stops on it.
  type: bool
  returned: always
done:
  description: Points recorded, by this call and earlier ones.
  type: int
  returned: success
total:
  description: Points of the sweep (targets x prompt kinds x concurrency levels).
  type: int
  returned: success
state:
  description: The state file.
  type: str
  returned: success
msg:
  description: The progress line (the point this call finished, done/total), and whether it resumed or started
    afresh and why.
  type: str
  returned: always
rows:
  description: One row per target, prompt kind and concurrency with requests, errors, tokens_per_s,
    requests_per_min, ttft_p50_s, ttft_p90_s, metrics_tokens_per_s and warmups_excluded.
  type: list
  returned: when ended
recommendations:
  description: Per replica (and the proxy), the concurrency to configure, why, and the concurrencies excluded.
  type: dict
  returned: when ended
table:
  description: The Markdown report.
  type: str
  returned: when ended
chart:
  description: Path of the PNG, or empty when matplotlib is not installed (chart_note says so).
  type: str
  returned: when ended
chart_note:
  description: Why there is no chart, or empty.
  type: str
  returned: when ended
"""

import json
import os
import time
import uuid

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils import _bench, _bench_state, _loadgen


def _metrics(replicas, timeout):
    out = {}
    for rep in replicas:
        try:
            out[rep["name"]] = _bench.parse_metrics(_loadgen.read_metrics(rep["url"], timeout))
        except (OSError, ValueError):
            out[rep["name"]] = {}
    return out


def _targets(p):
    replicas = p["replicas"]
    proxy = p["proxy_url"].rstrip("/")
    _bench.check_metrics_targets([r["url"].rstrip("/") for r in replicas], [proxy] if proxy else [])
    return [(r["name"], r["url"], [r]) for r in replicas] + ([("proxy", proxy, replicas)] if proxy else [])


def _measurer(p, urls):
    def warm_up(name):
        url = urls[name][0]
        return _loadgen.warmup(url, p["model"], 16, p["request_timeout"], api_key=p["api_key"], ca_path=p["ca_path"])

    def measure(name, kind, level):
        url, counted_replicas = urls[name]
        before = _metrics(counted_replicas, 10)
        started = time.monotonic()
        records = _loadgen.run(
            url,
            p["model"],
            level,
            level * p["requests_per_worker"],
            _loadgen.filler_prompt(p["prompts"][kind]),
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
        return row

    return warm_up, measure


def _read(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        return ""


def _write(path, text):
    # Whole or not at all: an interrupted run must leave the rows it finished, never half a file.
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _report(p, state, targets):
    rows = state["rows"]
    recs = {
        name: _bench.recommend(rows, name, p["weights"] or None, p["tolerance"], p["ttft_limit"] or None)
        for name, _url, _counted in targets
    }
    warmups = _bench_state.warmup_records(state, [name for name, _url, _counted in targets])
    table = _bench.render_markdown(rows, recs)
    _write(os.path.join(p["report_dir"], "bench.md"), table)
    report = {"rows": rows, "recommendations": recs, "warmups": warmups}
    _write(os.path.join(p["report_dir"], "bench.json"), json.dumps(report, indent=2, sort_keys=True))
    chart, note = "", ""
    try:
        chart = _bench.render_chart(rows, os.path.join(p["report_dir"], "bench.png"))
    except ImportError:
        note = "matplotlib is not installed on the control machine: no chart (pip install matplotlib)"
    return {"rows": rows, "recommendations": recs, "table": table, "chart": chart, "chart_note": note}


def sweep(p):
    """Measure the points not yet recorded (at most p["points"]); the report once every point is recorded."""
    targets = _targets(p)
    points = _bench_state.sweep_points([t[0] for t in targets], p["prompts"], p["concurrency"])
    run = {k: p[k] for k in ("requests_per_worker", "max_tokens", "request_timeout", "run_deadline")}
    inputs = _bench_state.sweep_inputs(
        p["model"], [(name, url) for name, url, _c in targets], p["prompts"], p["concurrency"], run, p["identity"]
    )
    os.makedirs(p["report_dir"], exist_ok=True)
    path = p["state"] or os.path.join(p["report_dir"], _bench_state.STATE_FILE)
    run_id = p["run_id"] or uuid.uuid4().hex
    state, note = _bench_state.resume(_bench_state.parse_state(_read(path)), inputs, points, run_id, p["fresh"], path)
    warm_up, measure = _measurer(p, {name: (url, counted) for name, url, counted in targets})
    measured = _bench_state.advance(
        state, points, measure, warm_up, lambda s: _write(path, _bench_state.dump_state(s)), run_id, p["points"]
    )
    if not measured:
        _write(path, _bench_state.dump_state(state))
    result = {
        "changed": bool(measured),
        "ended": len(state["rows"]) >= len(points),
        "done": len(state["rows"]),
        "total": len(points),
        "state": path,
        "msg": _bench_state.progress_line(state, points, measured, note),
    }
    if result["ended"]:
        result.update(_report(p, state, targets), changed=True)
    return result


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
            "context_length": {"type": "int", "default": 0},
            "weights": {"type": "dict", "default": {}},
            "requests_per_worker": {"type": "int", "default": 2},
            "max_tokens": {"type": "int", "default": 128, "no_log": False},
            "request_timeout": {"type": "int", "default": 300},
            "run_deadline": {"type": "int", "default": 120},
            "tolerance": {"type": "float", "default": 0.05},
            "ttft_limit": {"type": "float", "default": 0},
            "report_dir": {"type": "path", "required": True},
            "state": {"type": "path", "default": ""},
            "points": {"type": "int", "default": 0},
            "fresh": {"type": "bool", "default": False},
            "run_id": {"type": "str", "default": ""},
            "identity": {"type": "raw"},
        },
        supports_check_mode=True,
    )
    p = module.params
    problems = _bench.prompt_fit_problems(p["prompts"], p["max_tokens"], p["context_length"])
    if problems:
        module.fail_json(msg=" ".join(problems), problems=problems)
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, ended=True, msg="check mode: no load sent")
    try:
        result = sweep(module.params)
    except _bench.MetricsSourceError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
