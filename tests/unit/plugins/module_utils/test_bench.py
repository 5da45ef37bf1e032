"""Sweep arithmetic: warm-up never counted, metrics per replica and summed, the concurrency to configure."""

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from ansible_collections.gb10.serving.plugins.module_utils import _bench

FIXTURES = Path(__file__).parents[2] / "fixtures" / "metrics"


def exposition(generated, running=0, engines=("0",)):
    """A /metrics text written by prometheus_client itself with vLLM's names (as the engine writes them)."""
    reg = CollectorRegistry()
    tokens = Counter(
        "vllm:generation_tokens", "Number of generation tokens processed.", ["engine", "model_name"], registry=reg
    )
    run = Gauge("vllm:num_requests_running", "Running.", ["engine", "model_name"], registry=reg)
    for e in engines:
        tokens.labels(engine=e, model_name="m").inc(generated)
        run.labels(engine=e, model_name="m").set(running)
    return generate_latest(reg).decode()


def test_parse_metrics_reads_the_real_capture():
    m = _bench.parse_metrics((FIXTURES / "vllm_metrics_dgx-spark_grep_0.22.1rc1.txt").read_text())
    assert m["vllm:num_requests_running"] == 0.0
    assert m["vllm:kv_cache_usage_perc"] == 0.0
    assert "vllm:num_preemptions_created" not in m


def test_parse_metrics_sums_engines_and_skips_created():
    m = _bench.parse_metrics(exposition(10, running=2, engines=("0", "1")))
    assert m[_bench.TOKENS_COUNTER] == 20.0
    assert m["vllm:num_requests_running"] == 4.0
    assert not any(k.endswith("_created") for k in m)


def test_pitfall_metrics_read_through_proxy_jump_between_replicas():
    replica_a = _bench.parse_metrics(exposition(1000))
    replica_b = _bench.parse_metrics(exposition(400))
    # through the proxy, read 1 lands on A and read 2 on B: the "counter" goes backwards
    assert _bench.counter_delta(replica_a, replica_b) is None
    with pytest.raises(_bench.MetricsSourceError, match="proxy"):
        _bench.check_metrics_targets(["http://10.0.0.1:8000", "http://10.0.0.1:8080"], ["http://10.0.0.1:8080"])
    # read directly and summed, the totals are monotonic
    before = {"a": replica_a, "b": replica_b}
    after = {"a": _bench.parse_metrics(exposition(1100)), "b": _bench.parse_metrics(exposition(450))}
    assert _bench.summed_delta(before, after) == 150.0


def test_a_replica_listed_twice_is_refused():
    with pytest.raises(_bench.MetricsSourceError, match="twice"):
        _bench.check_metrics_targets(["http://a:8000", "http://a:8000"], [])


def test_summed_delta_is_none_when_a_replica_restarted():
    before = {"a": {_bench.TOKENS_COUNTER: 50.0}, "b": {_bench.TOKENS_COUNTER: 10.0}}
    after = {"a": {_bench.TOKENS_COUNTER: 60.0}, "b": {_bench.TOKENS_COUNTER: 2.0}}
    assert _bench.summed_delta(before, after) is None
    assert _bench.summed_delta(before, {"a": {}}) is None


def rec(start, ttft, end, tokens, warmup=False, ok=True):
    return {
        "start": start,
        "first_token": start + ttft,
        "end": end,
        "completion_tokens": tokens,
        "ok": ok,
        "warmup": warmup,
    }


def test_pitfall_first_request_is_warmup_never_counted():
    steady = [rec(10, 0.2, 12, 80), rec(10, 0.2, 12, 80)]
    # seed 004: the first request after start ran at ~7 tok/s, the next ones at ~40
    with_warmup = [rec(0, 5.0, 10, 70, warmup=True), *steady]
    assert _bench.summarize(with_warmup)["tokens_per_s"] == _bench.summarize(steady)["tokens_per_s"] == 80.0
    assert _bench.summarize(with_warmup)["ttft_p90_s"] == 0.2
    assert _bench.summarize(with_warmup)["warmups_excluded"] == 1
    only = _bench.summarize([rec(0, 5.0, 10, 70, warmup=True)])
    assert only["requests"] == 0 and only["tokens_per_s"] is None


def test_summarize_counts_errors_apart_and_rates_over_the_window():
    out = _bench.summarize([rec(0, 0.5, 30, 300), rec(0, 1.5, 60, 300), rec(0, 0, 1, 0, ok=False)])
    assert out == {
        "requests": 2,
        "errors": 1,
        "tokens_per_s": 10.0,
        "requests_per_min": 2.0,
        "ttft_p50_s": 1.0,
        "ttft_p90_s": 1.5,
        "warmups_excluded": 0,
    }


def rows_for(target, table):
    return [
        {"target": target, "prompt": kind, "concurrency": c, "tokens_per_s": tps, "ttft_p90_s": 1.0}
        for kind, points in table.items()
        for c, tps in points.items()
    ]


def test_recommendation_seed_002_twelve_beats_eight_and_sixteen_slows_long_prompts():
    # seed 002's single-replica numbers (short: 36/82/109/150; long: 81@4, 113@8, 87@16), with 12 measured too
    rows = rows_for(
        "spark-1",
        {
            "short": {1: 36, 4: 82, 8: 109, 12: 131, 16: 150},
            "long": {1: 30, 4: 81, 8: 113, 12: 112, 16: 87},
        },
    )
    out = _bench.recommend(rows, "spark-1")
    assert out["concurrency"] == 12
    assert 16 in out["excluded"] and "long slower" in out["excluded"][16]


def test_recommendation_without_twelve_stops_at_eight():
    rows = rows_for("spark-1", {"short": {1: 36, 4: 82, 8: 109, 16: 150}, "long": {4: 81, 8: 113, 16: 87}})
    out = _bench.recommend(rows, "spark-1")
    assert out["concurrency"] == 8
    assert "not measured" in out["excluded"][1]


def test_recommendation_honours_ttft_limit_and_weights():
    rows = rows_for("r", {"short": {4: 80, 8: 110}})
    rows[1]["ttft_p90_s"] = 9.0
    assert _bench.recommend(rows, "r", ttft_limit_s=5.0)["concurrency"] == 4
    assert _bench.recommend(rows, "r")["concurrency"] == 8
    assert _bench.recommend([], "r")["concurrency"] is None


def test_markdown_lists_proxy_first_and_the_recommendation():
    rows = [
        {
            "target": t,
            "prompt": "short",
            "concurrency": 4,
            "requests": 8,
            "errors": 0,
            "tokens_per_s": 80.0,
            "requests_per_min": 20.0,
            "ttft_p50_s": 0.2,
            "ttft_p90_s": 0.3,
            "metrics_tokens_per_s": None,
        }
        for t in ("spark-1", "proxy")
    ]
    text = _bench.render_markdown(rows, {"spark-1": {"concurrency": 4, "reason": "why"}})
    body = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert body[0].startswith("| proxy |") and body[1].startswith("| spark-1 |")
    assert "configure max_num_seqs = 4 (why)" in text and "warm-up, never counted" in text


def test_chart_series_one_line_per_target_and_prompt():
    rows = rows_for("proxy", {"short": {8: 2, 4: 1}}) + rows_for("spark-1", {"short": {4: 1}})
    series = _bench.chart_series(rows)
    assert list(series) == [("proxy", "short"), ("spark-1", "short")]
    assert [p[0] for p in series[("proxy", "short")]] == [4, 8]


def test_chart_png_when_matplotlib_is_installed(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [dict(r, ttft_p50_s=0.1) for r in rows_for("proxy", {"short": {1: 10, 4: 30}})]
    path = _bench.render_chart(rows, str(tmp_path / "bench.png"))
    assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_prompt_that_fits_the_served_context_passes():
    # 8192 - 128 - 32 = 8032 words of filler still fit
    assert _bench.prompt_fit_problems({"short": 64, "long": 8032}, 128, 8192) == []
    assert _bench.prompt_fit_problems({"long": 10**6}, 128, 0) == []  # unknown context: nothing to check against


def test_a_prompt_over_the_served_context_is_named_with_its_numbers_and_fix():
    (problem,) = _bench.prompt_fit_problems({"short": 64, "long": 8067}, 128, 8192)
    assert problem.startswith("bench_prompts.long is 8067 tokens")
    assert "about 8227 tokens, over the served context of 8192" in problem
    assert "Set bench_prompts.long to at most 8032" in problem
