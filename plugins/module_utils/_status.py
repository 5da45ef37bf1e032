# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Live status: what a person asks first, per node and summed, each replica read on its own address.

Pure functions over what the status playbook read: each replica's /metrics (two reads a window apart, so
tokens/s is a rate over that window, never a counter read through the proxy), /proc/meminfo, earlyoom's
arguments, the lockstep verdict and HAProxy's ``show stat`` CSV.
"""

from __future__ import annotations

import csv
import io
import re
import shlex

from ansible_collections.gb10.serving.plugins.module_utils._bench import counter_delta
from ansible_collections.gb10.serving.plugins.module_utils._earlyoom import effective_thresholds


def parse_show_stat(text):
    """HAProxy ``show stat`` CSV (header ``# pxname,svname,...``) as a list of dicts; empty fields dropped."""
    lines = [line for line in str(text).splitlines() if line.strip()]
    if not lines or not lines[0].startswith("# "):
        raise ValueError("not HAProxy show stat output: the first line must be the '# pxname,svname,...' header")
    header = lines[0][2:].rstrip(",").split(",")
    rows = []
    for values in csv.reader(io.StringIO("\n".join(lines[1:]))):
        row = {k: v for k, v in zip(header, values, strict=False) if k and v != ""}
        rows.append(row)
    return rows


def backend_view(rows, backend):
    """{server: {status, check_status, current_sessions, queued, weight}} of one backend's servers."""
    view = {}
    for row in rows:
        if row.get("pxname") != backend or row.get("svname") in ("BACKEND", "FRONTEND"):
            continue
        view[row["svname"]] = {
            "status": row.get("status", "?"),
            "check_status": row.get("check_status", ""),
            "current_sessions": int(row.get("scur", 0)),
            "queued": int(row.get("qcur", 0)),
            "weight": int(row.get("weight", 0)),
        }
    return view


def meminfo_mib(text):
    """{"mem_total_mib", "mem_available_mib"} from /proc/meminfo."""
    values = {}
    for line in str(text).splitlines():
        match = re.match(r"(MemTotal|MemAvailable):\s+(\d+)\s*kB", line)
        if match:
            values[match.group(1)] = int(match.group(2)) // 1024
    if "MemTotal" not in values or "MemAvailable" not in values:
        raise ValueError("MemTotal or MemAvailable missing from /proc/meminfo")
    return {"mem_total_mib": values["MemTotal"], "mem_available_mib": values["MemAvailable"]}


def sigterm_percent(default_file_text):
    """earlyoom's SIGTERM memory percent from /etc/default/earlyoom's EARLYOOM_ARGS (10 when -m is not given).

    None when the file has no EARLYOOM_ARGS line (earlyoom not configured on the node).
    """
    if not re.search(r"^\s*EARLYOOM_ARGS=", str(default_file_text), re.M):
        return None
    args = []
    for line in str(default_file_text).splitlines():
        match = re.match(r"\s*EARLYOOM_ARGS=(.*)$", line)
        if match:
            args = shlex.split(shlex.split(match.group(1))[0]) if match.group(1).strip() else []
    mem = None
    for i, arg in enumerate(args):
        if arg == "-m" and i + 1 < len(args):
            mem = args[i + 1]
        elif arg.startswith("-m") and len(arg) > 2:
            mem = arg[2:]
    return effective_thresholds(mem, None)["SIGTERM"]["mem"]


def node_status(node, health_ok, first, second, window_s, meminfo, sigterm_pct, lockstep, proxy_view):
    """One node's line: first/second are parse_metrics() outputs ``window_s`` seconds apart (may be {})."""
    delta = counter_delta(first, second) if first and second else None
    threshold_mib = meminfo["mem_total_mib"] * float(sigterm_pct) / 100.0 if sigterm_pct is not None else None
    kv = second.get("vllm:kv_cache_usage_perc")
    return {
        "node": node,
        "health": "ok" if health_ok else "down",
        "running": int(second.get("vllm:num_requests_running", 0)) if second else None,
        "waiting": int(second.get("vllm:num_requests_waiting", 0)) if second else None,
        "kv_cache_percent": round(kv * 100.0, 1) if kv is not None else None,
        "tokens_per_s": round(delta / window_s, 1) if delta is not None and window_s > 0 else None,
        "mem_available_mib": meminfo["mem_available_mib"],
        "earlyoom_sigterm_mib": round(threshold_mib) if threshold_mib is not None else None,
        "margin_mib": round(meminfo["mem_available_mib"] - threshold_mib) if threshold_mib is not None else None,
        "lockstep": lockstep or "unknown",
        "proxy": proxy_view or {"status": "not in the proxy"},
    }


def summary(nodes):
    """Summed view: requests and tokens/s added up, the tightest margin, every node healthy or not."""

    def total(key):
        values = [n[key] for n in nodes if n.get(key) is not None]
        return round(sum(values), 1) if values else None

    margins = [n["margin_mib"] for n in nodes if n["margin_mib"] is not None]
    return {
        "nodes": len(nodes),
        "healthy": sum(1 for n in nodes if n["health"] == "ok"),
        "running": total("running"),
        "waiting": total("waiting"),
        "tokens_per_s": total("tokens_per_s"),
        "tightest_margin_mib": min(margins) if margins else None,
        "proxy_up": sum(1 for n in nodes if str(n["proxy"].get("status", "")).startswith("UP")),
    }


def _v(value, suffix=""):
    return "-" if value is None else f"{value}{suffix}"


def render_text(topology, model, image, nodes, total):
    """The status as plain lines a terminal shows well."""
    lines = [f"topology {topology}  model {model}  image {image}"]
    for n in nodes:
        px = n["proxy"]
        lines.append(
            f"{n['node']}: health {n['health']}, running {_v(n['running'])}, waiting {_v(n['waiting'])}, "
            f"KV {_v(n['kv_cache_percent'], '%')}, {_v(n['tokens_per_s'])} tok/s, "
            + (
                f"margin {n['margin_mib']} MiB over earlyoom SIGTERM at {n['earlyoom_sigterm_mib']} MiB, "
                if n["margin_mib"] is not None
                else f"MemAvailable {n['mem_available_mib']} MiB, earlyoom not configured, "
            )
            + f"lockstep {n['lockstep']}, proxy {px.get('status')}"
            + (f" ({px['current_sessions']} in flight, {px['queued']} queued)" if "current_sessions" in px else "")
        )
    lines.append(
        f"total: {total['healthy']}/{total['nodes']} healthy, {total['proxy_up']} UP in the proxy, running "
        f"{_v(total['running'])}, waiting {_v(total['waiting'])}, {_v(total['tokens_per_s'])} tok/s, "
        f"tightest margin {_v(total['tightest_margin_mib'])} MiB"
    )
    return lines


def scrape_targets(replicas, job="vllm"):
    """Prometheus file_sd entries, one per replica (or other endpoint): [{"targets": ["addr:port"], "labels": {...}}].

    ``replicas``: [{node, address, port}]; sorted by node, so a rewrite with the same endpoints is the same file.
    """
    return [
        {"targets": [f"{r['address']}:{r['port']}"], "labels": {"job": job, "node": r["node"]}}
        for r in sorted(replicas, key=lambda r: r["node"])
    ]
