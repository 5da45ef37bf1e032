"""Live status: HAProxy's view, memory margin against earlyoom, per node and summed."""

from pathlib import Path

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import _status

SHOW_STAT = Path(__file__).parents[2] / "fixtures" / "status" / "haproxy_show_stat.csv"
MEMINFO = "MemTotal:       127605760 kB\nMemFree:         1000000 kB\nMemAvailable:   20971520 kB\n"


def test_show_stat_fixture_backend_view():
    rows = _status.parse_show_stat(SHOW_STAT.read_text())
    view = _status.backend_view(rows, "www")
    assert set(view) == {"www", "bck"}
    assert view["www"] == {"status": "UP", "check_status": "L7OK", "current_sessions": 0, "queued": 0, "weight": 1}
    assert _status.backend_view(rows, "nope") == {}


def test_show_stat_refuses_other_text():
    with pytest.raises(ValueError, match="header"):
        _status.parse_show_stat("Unknown command\n")


def test_meminfo_and_sigterm_threshold_from_earlyoom_args():
    assert _status.meminfo_mib(MEMINFO) == {"mem_total_mib": 124615, "mem_available_mib": 20480}
    assert _status.sigterm_percent('# managed\nEARLYOOM_ARGS="-r 3600 -m 4,2 -s 100,100"\n') == 4.0
    assert _status.sigterm_percent('EARLYOOM_ARGS="-m4"') == 4.0
    assert _status.sigterm_percent('EARLYOOM_ARGS=""') == 10.0
    assert _status.sigterm_percent("") is None
    with pytest.raises(ValueError):
        _status.meminfo_mib("MemTotal: 1 kB\n")


def node(name, running, tokens_before, tokens_after, proxy_status="UP", health=True):
    first = {"vllm:generation_tokens_total": tokens_before}
    second = {
        "vllm:generation_tokens_total": tokens_after,
        "vllm:num_requests_running": running,
        "vllm:num_requests_waiting": 1,
        "vllm:kv_cache_usage_perc": 0.25,
    }
    view = {"status": proxy_status, "check_status": "L7OK", "current_sessions": running, "queued": 0, "weight": 1}
    return _status.node_status(name, health, first, second, 60, _status.meminfo_mib(MEMINFO), 4.0, "covered", view)


def test_node_status_margin_rate_and_kv():
    n = node("spark-1", 3, 1000, 7000)
    assert n["tokens_per_s"] == 100.0
    assert n["kv_cache_percent"] == 25.0
    assert n["earlyoom_sigterm_mib"] == 4985
    assert n["margin_mib"] == 20480 - 4985


def test_pitfall_metrics_read_through_proxy_jump_between_replicas_gives_no_rate():
    # two reads through the proxy land on different replicas: the counter goes backwards, no rate is invented
    n = node("proxy-read", 0, 7000, 1000)
    assert n["tokens_per_s"] is None


def test_summary_adds_replicas_and_keeps_the_tightest_margin():
    nodes = [node("spark-1", 3, 0, 6000), node("spark-2", 2, 0, 3000, proxy_status="DOWN", health=False)]
    total = _status.summary(nodes)
    assert total == {
        "nodes": 2,
        "healthy": 1,
        "running": 5,
        "waiting": 2,
        "tokens_per_s": 150.0,
        "tightest_margin_mib": 15495,
        "proxy_up": 1,
    }
    lines = _status.render_text("replicas", "sim-model", "reg/x@sha256:ab", nodes, total)
    assert lines[0] == "topology replicas  model sim-model  image reg/x@sha256:ab"
    assert "spark-2: health down" in lines[2] and "proxy DOWN" in lines[2]
    assert lines[-1].startswith("total: 1/2 healthy, 1 UP in the proxy")


def test_node_without_metrics_prints_dashes():
    n = _status.node_status("s", False, {}, {}, 60, _status.meminfo_mib(MEMINFO), 4.0, None, None)
    assert (n["running"], n["tokens_per_s"], n["lockstep"], n["proxy"]["status"]) == (
        None,
        None,
        "unknown",
        "not in the proxy",
    )
    assert "running -" in _status.render_text("replicas", "m", "i", [n], _status.summary([n]))[1]


def test_scrape_targets_one_per_replica():
    out = _status.scrape_targets(
        [{"node": "b", "address": "10.0.0.2", "port": 8000}, {"node": "a", "address": "10.0.0.1", "port": 8000}]
    )
    assert out == [
        {"targets": ["10.0.0.1:8000"], "labels": {"job": "vllm", "node": "a"}},
        {"targets": ["10.0.0.2:8000"], "labels": {"job": "vllm", "node": "b"}},
    ]


def test_node_without_earlyoom_has_no_margin_and_says_so():
    n = _status.node_status("s", True, {}, {}, 60, _status.meminfo_mib(MEMINFO), None, "covered", None)
    assert n["margin_mib"] is None and n["earlyoom_sigterm_mib"] is None
    total = _status.summary([n])
    assert total["tightest_margin_mib"] is None
    assert "MemAvailable 20480 MiB, earlyoom not configured" in _status.render_text("r", "m", "i", [n], total)[1]
