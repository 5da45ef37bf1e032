# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Concurrency sweep arithmetic: metrics read per replica, warm-up excluded, the concurrency to configure.

Pure functions over plain data (the load generator in _loadgen.py produces the request records). Rules from the
field reports:
- the first request after any start compiles kernels and runs at a fraction of the steady rate (seed 004): a
  record flagged ``warmup`` is never counted, and a run whose only requests are warm-ups has no numbers;
- /metrics is read from each replica's own address and summed, never through the proxy: through the proxy,
  consecutive reads come from different replicas and counters jump back and forth (seed 002);
- the concurrency to configure is the one with the best throughput for the mix among those where no prompt
  kind has slowed down past its own peak (seed 002: 12 beat 8 for their mix; above 8 long requests one replica
  got slower).
"""

from __future__ import annotations

import statistics

DEFAULT_CONCURRENCY = (1, 4, 8, 12, 16)
TOKENS_COUNTER = "vllm:generation_tokens_total"
PROMPT_COUNTER = "vllm:prompt_tokens_total"
SUCCESS_COUNTER = "vllm:request_success_total"


# What a sweep request holds beyond its filler words (_loadgen.filler_prompt): the question and the chat template.
PROMPT_OVERHEAD_TOKENS = 32


def prompt_fit_problems(prompts, max_tokens, context_length):
    """Why a prompt kind cannot be measured: its words, the question, the template and ``max_tokens`` over the
    served context (vLLM answers such a request with 400, and the sweep would time its refusals). One sentence
    per kind, with the numbers and the fix; none when the context is unknown (0 or None)."""
    if not context_length:
        return []
    room = int(context_length) - int(max_tokens) - PROMPT_OVERHEAD_TOKENS
    problems = []
    for kind, size in sorted(prompts.items()):
        if int(size) > room:
            problems.append(
                f"bench_prompts.{kind} is {size} tokens: with bench_max_tokens {max_tokens} and about "
                f"{PROMPT_OVERHEAD_TOKENS} tokens of question and chat template, a request holds about "
                f"{int(size) + int(max_tokens) + PROMPT_OVERHEAD_TOKENS} tokens, over the served context of "
                f"{context_length} (the plan's model.context_length), which vLLM refuses with 400. Set "
                f"bench_prompts.{kind} to at most {max(room, 0)}, or lower bench_max_tokens."
            )
    return problems


class MetricsSourceError(ValueError):
    """Metrics would be read where they cannot be trusted (through the proxy)."""


def parse_metrics(text):
    """Sum every sample of a Prometheus exposition by sample name (over engines, labels, finish reasons).

    Uses prometheus_client's own parser. ``*_created`` samples (timestamps, not counts) are left out.
    """
    from prometheus_client.parser import text_string_to_metric_families

    totals = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            totals[sample.name] = totals.get(sample.name, 0.0) + float(sample.value)
    return totals


def check_metrics_targets(targets, proxy_endpoints):
    """Refuse metrics targets that are the proxy's: each replica must be read on its own address:port."""
    proxied = sorted(set(targets) & set(proxy_endpoints))
    if proxied:
        raise MetricsSourceError(
            f"metrics target(s) {', '.join(proxied)} are the proxy: consecutive reads would come from different "
            "replicas and counters would jump back and forth. Read each replica's own /metrics and sum them."
        )
    if len(set(targets)) != len(targets):
        raise MetricsSourceError(f"metrics targets {targets} name a replica twice: its counters would count double")
    return list(targets)


def counter_delta(before, after, name=TOKENS_COUNTER):
    """after - before of one counter of one replica; None when it went backwards (restart, or not one replica)."""
    if name not in before or name not in after:
        return None
    delta = after[name] - before[name]
    return delta if delta >= 0 else None


def summed_delta(before_by_replica, after_by_replica, name=TOKENS_COUNTER):
    """Sum of per-replica counter deltas; None when any replica's counter went backwards or is missing."""
    total = 0.0
    for replica, after in after_by_replica.items():
        delta = counter_delta(before_by_replica.get(replica, {}), after, name)
        if delta is None:
            return None
        total += delta
    return total


def _percentile(values, pct):
    ordered = sorted(values)
    if not ordered:
        return None
    k = max(0, min(len(ordered) - 1, round(pct / 100.0 * (len(ordered) - 1))))
    return ordered[k]


def summarize(records):
    """Numbers of one (target, prompt kind, concurrency) run from its request records.

    A record: {"start", "first_token", "end" (seconds, one clock), "completion_tokens", "ok", "warmup"}.
    Warm-up records are dropped before anything is counted; failed requests count as errors only.
    """
    counted = [r for r in records if not r.get("warmup")]
    good = [r for r in counted if r.get("ok")]
    errors = len(counted) - len(good)
    if not good:
        return {
            "requests": 0,
            "errors": errors,
            "tokens_per_s": None,
            "requests_per_min": None,
            "ttft_p50_s": None,
            "ttft_p90_s": None,
            "warmups_excluded": len(records) - len(counted),
        }
    window = max(r["end"] for r in good) - min(r["start"] for r in good)
    tokens = sum(int(r.get("completion_tokens") or 0) for r in good)
    ttfts = [r["first_token"] - r["start"] for r in good if r.get("first_token") is not None]
    return {
        "requests": len(good),
        "errors": errors,
        "tokens_per_s": round(tokens / window, 2) if window > 0 else None,
        "requests_per_min": round(len(good) * 60.0 / window, 2) if window > 0 else None,
        "ttft_p50_s": round(statistics.median(ttfts), 3) if ttfts else None,
        "ttft_p90_s": round(_percentile(ttfts, 90), 3) if ttfts else None,
        "warmups_excluded": len(records) - len(counted),
    }


def recommend(rows, target, weights=None, tolerance=0.05, ttft_limit_s=None):
    """The concurrency to configure for ``target`` from its sweep rows.

    rows: [{"target", "prompt", "concurrency", "tokens_per_s", "ttft_p90_s"}]. For each prompt kind, a
    concurrency is degraded when its tokens/s is below that kind's best at any lower-or-equal concurrency by more
    than ``tolerance`` (adding requests slowed it down), or its TTFT p90 exceeds ``ttft_limit_s``. Among the
    concurrencies where no kind is degraded (and every kind was measured), pick the highest weighted tokens/s
    (weights per prompt kind, default equal); ties go to the lower concurrency.
    Returns {"concurrency", "reason", "excluded": {concurrency: why}}.
    """
    mine = [r for r in rows if r["target"] == target and r.get("tokens_per_s") is not None]
    kinds = sorted({r["prompt"] for r in mine})
    if not mine:
        return {"concurrency": None, "reason": f"no counted measurements for {target}", "excluded": {}}
    weights = weights or {k: 1.0 for k in kinds}
    table = {(r["prompt"], r["concurrency"]): r for r in mine}
    levels = sorted({r["concurrency"] for r in mine})
    excluded = {}
    for kind in kinds:
        best_so_far = 0.0
        for level in levels:
            row = table.get((kind, level))
            if row is None:
                excluded.setdefault(level, f"{kind} not measured")
                continue
            tps = row["tokens_per_s"]
            if best_so_far and tps < best_so_far * (1 - tolerance):
                excluded.setdefault(level, f"{kind} slower than at a lower concurrency ({tps:.1f} < {best_so_far:.1f})")
            if ttft_limit_s is not None and (row.get("ttft_p90_s") or 0) > ttft_limit_s:
                excluded.setdefault(level, f"{kind} TTFT p90 {row['ttft_p90_s']:.2f}s over {ttft_limit_s:.2f}s")
            best_so_far = max(best_so_far, tps)
    candidates = [lv for lv in levels if lv not in excluded]
    if not candidates:
        return {"concurrency": None, "reason": "every concurrency was degraded", "excluded": excluded}

    def mix(level):
        return sum(weights.get(k, 0.0) * table[(k, level)]["tokens_per_s"] for k in kinds)

    choice = max(candidates, key=lambda lv: (round(mix(lv), 6), -lv))
    parts = ", ".join(f"{k} {table[(k, choice)]['tokens_per_s']:.1f} tok/s" for k in kinds)
    return {
        "concurrency": choice,
        "reason": f"best mix throughput without a slowdown at concurrency {choice}: {parts}",
        "excluded": excluded,
    }


def _cell(value, fmt="{:.1f}"):
    return "-" if value is None else fmt.format(value)


def render_markdown(rows, recommendations):
    """The sweep as a Markdown table, then one recommendation line per replica."""
    lines = [
        "| target | prompt | concurrency | requests | errors | tokens/s | requests/min | TTFT p50 s | TTFT p90 s "
        "| tokens/s by /metrics |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in sorted(rows, key=lambda r: (r["target"] != "proxy", r["target"], r["prompt"], r["concurrency"])):
        lines.append(
            f"| {r['target']} | {r['prompt']} | {r['concurrency']} | {r['requests']} | {r['errors']} "
            f"| {_cell(r.get('tokens_per_s'))} | {_cell(r.get('requests_per_min'))} "
            f"| {_cell(r.get('ttft_p50_s'), '{:.3f}')} | {_cell(r.get('ttft_p90_s'), '{:.3f}')} "
            f"| {_cell(r.get('metrics_tokens_per_s'))} |"
        )
    lines.append("")
    lines.append("First request after any start: a warm-up, never counted.")
    for target, rec in sorted(recommendations.items()):
        value = rec["concurrency"] if rec["concurrency"] is not None else "none"
        lines.append(f"- {target}: configure max_num_seqs = {value} ({rec['reason']})")
    return "\n".join(lines) + "\n"


def chart_series(rows):
    """{(target, prompt): [(concurrency, tokens_per_s, ttft_p50_s)]} sorted by concurrency (what the chart draws)."""
    series = {}
    for r in rows:
        series.setdefault((r["target"], r["prompt"]), []).append(
            (r["concurrency"], r.get("tokens_per_s"), r.get("ttft_p50_s"))
        )
    return {k: sorted(v) for k, v in sorted(series.items())}


def render_chart(rows, path):
    """Write a PNG: tokens/s and TTFT against concurrency, one line per replica and one for the proxy.

    matplotlib is imported here only, so everything else works without it; ImportError tells the caller.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    fig, (top, bottom) = pyplot.subplots(2, 1, figsize=(8, 8), sharex=True)
    for (target, prompt), points in chart_series(rows).items():
        style = "-" if prompt == "short" else "--"
        xs = [p[0] for p in points]
        top.plot(xs, [p[1] for p in points], style, marker="o", label=f"{target} ({prompt})")
        bottom.plot(xs, [p[2] for p in points], style, marker="o", label=f"{target} ({prompt})")
    top.set_ylabel("tokens/s")
    bottom.set_ylabel("TTFT p50 (s)")
    bottom.set_xlabel("concurrent requests")
    top.legend(fontsize="small")
    top.grid(True)
    bottom.grid(True)
    fig.tight_layout()
    fig.savefig(path, format="png")
    pyplot.close(fig)
    return path
