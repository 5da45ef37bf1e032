# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/monitoring/files' Grafana dashboard: every panel query names only series the role records or scrapes."""

from __future__ import annotations

import json
import re

import yaml
from monitoring_render import ROLE, render

DASHBOARD = ROLE / "files" / "grafana-dashboard-gb10-serving.json"
# PromQL words that are not series names: aggregations, functions, modifiers, set operators.
KEYWORDS = {
    "sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile", "count_values", "group",
    "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or", "unless", "inf",
    "nan",
}  # fmt: skip
NAME = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


def series_names(expr):
    """The series (metric) names a PromQL expression reads.

    A plain tokenizer, not a PromQL parser: it drops string literals, Grafana variables ($x, ${x}), label matchers
    ({...}), range and subquery brackets ([...]), the label lists of by/without/on/ignoring/group_left/group_right
    (...), and any word followed by "(" (a function); of the words left, keywords and numbers go. It keeps names
    with colons (vllm:..., recording rules); numbers and durations (offset 5m) go. What it does not handle: a
    {__name__="..."} selector (the name inside a matcher is dropped, not checked), a label list with parentheses
    inside it, and a series name that is also a keyword (a metric called "on" or "and" would be dropped).
    """
    text = re.sub(r'"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|`[^`]*`', " ", expr)
    text = re.sub(r"\$\{[^}]*\}|\$[A-Za-z_]\w*", " ", text)
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    text = re.sub(r"[A-Za-z_:][A-Za-z0-9_:]*\s*\(", "(", text)
    text = re.sub(r"\b\d+(\.\d+)?([eE][+-]?\d+)?[a-z]*\b", " ", text)
    return {word for word in NAME.findall(text) if word.lower() not in KEYWORDS}


def known_series():
    """What the role records (every rule's name) and scrapes (every name its rules read, and Prometheus's own up)."""
    rules = [rule for group in yaml.safe_load(render("rules.yml.j2"))["groups"] for rule in group["rules"]]
    recorded = {rule["record"] for rule in rules}
    scraped = set().union(*(series_names(str(rule["expr"])) for rule in rules)) - recorded
    return recorded, scraped | {"up"}


def queries():
    dashboard = json.loads(DASHBOARD.read_text())
    return [(panel["title"], target["expr"]) for panel in dashboard["panels"] for target in panel.get("targets", [])]


def test_tokenizer_keeps_vllm_names_and_drops_the_rest():
    expr = 'sum by (node) (rate(vllm:generation_tokens_total{job="vllm",x=~"a|b"}[$__rate_interval])) / 2 > 0'
    assert series_names(expr) == {"vllm:generation_tokens_total"}
    assert series_names("gb10:up:sum + on(job) group_left(node) up") == {"gb10:up:sum", "up"}


def test_every_panel_query_names_a_recorded_or_scraped_series():
    recorded, scraped = known_series()
    assert {"gb10:vllm_generation_tokens:rate", "gb10_replica:vllm_generation_tokens:rate"} <= recorded
    assert {"vllm:generation_tokens_total", "vllm:prefix_cache_hits_total", "node_memory_MemAvailable_bytes"} <= scraped
    found = queries()
    assert len(found) >= 7
    for title, expr in found:
        names = series_names(expr)
        assert names, f"{title}: {expr!r} names no series"
        unknown = sorted(names - recorded - scraped)
        assert not unknown, f"{title}: {unknown} neither recorded nor scraped"


def test_every_recorded_figure_has_a_panel():
    recorded = known_series()[0]
    shown = set().union(*(series_names(expr) for _title, expr in queries()))
    assert recorded <= shown, sorted(recorded - shown)


def test_dashboard_asks_for_its_prometheus_datasource():
    dashboard = json.loads(DASHBOARD.read_text())
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["datasource"]
    assert all(panel["datasource"]["uid"] == "${datasource}" for panel in dashboard["panels"])
