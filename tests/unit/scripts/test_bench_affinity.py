# Copyright: gb10.serving maintainers
# Apache-2.0
"""scripts/bench_affinity.py (make bench-affinity) without a simulation: the hit rates come from vLLM's own counters
as deltas per replica; without those counters (the simulation's stand-in engine) it says so, exits 2 and changes
nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from source_loader import load

bench = load("bench_affinity", Path(__file__).resolve().parents[3] / "scripts" / "bench_affinity.py")

VLLM = """# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 600.0
"""
STAND_IN = """# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{model_name="m"} 42.0
"""


def test_hit_rates_are_deltas_of_each_replicas_own_counters():
    parsed = bench.parse_metrics(VLLM)
    assert parsed[bench.HITS] == 600.0 and parsed[bench.QUERIES] == 1000.0
    before = {"spark-1": {bench.HITS: 600.0, bench.QUERIES: 1000.0}, "spark-2": {bench.HITS: 0.0, bench.QUERIES: 0.0}}
    after = {"spark-1": {bench.HITS: 1500.0, bench.QUERIES: 2000.0}, "spark-2": {bench.HITS: 0.0, bench.QUERIES: 0.0}}
    per, total = bench.hit_rates(before, after)
    assert per == {"spark-1": (900.0, 1000.0, 0.9), "spark-2": (0.0, 0.0, None)}
    assert total == (900.0, 1000.0, 0.9)
    with pytest.raises(ValueError, match="spark-1's prefix-cache counters went backwards"):
        bench.hit_rates(after, before)


def test_percentiles():
    assert bench.percentile([], 95) is None
    assert bench.percentile([float(i) for i in range(1, 101)], 95) == 95.0


def test_without_vllms_counters_it_says_so_and_changes_nothing(monkeypatch, capsys):
    monkeypatch.setattr(bench, "read_metrics", lambda: {"spark-1": bench.parse_metrics(STAND_IN), "spark-2": {}})
    monkeypatch.setattr(bench, "set_affinity", lambda mode: pytest.fail("the proxy must not be touched"))
    assert bench.main() == 2
    err = capsys.readouterr().err
    assert "spark-1 lacks vllm:prefix_cache_hits_total, vllm:prefix_cache_queries_total" in err
    assert "stand-in engine" in err and "Nothing was changed" in err


def test_every_conversation_has_its_own_long_prefix_per_run():
    first, again, other = bench.system_prompt("a", 0), bench.system_prompt("b", 0), bench.system_prompt("a", 1)
    assert len(first.split()) > bench.PROMPT_WORDS and first != again != other
