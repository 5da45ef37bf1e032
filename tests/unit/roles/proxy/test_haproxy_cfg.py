# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/proxy's haproxy.cfg rendered from a serving plan: leastconn, maxconn from the plan, no lockout."""

from __future__ import annotations

import re

from haproxy_render import NEEDS_HAPROXY, LiveHAProxy, render


def test_leastconn_with_per_replica_maxconn_from_the_plan():
    cfg = render((12, 8))
    assert re.search(r"^\s+balance leastconn$", cfg, re.M)
    assert re.search(r"^\s+server spark-1 192\.168\.200\.11:8000 maxconn 12( agent-check .*)?$", cfg, re.M)
    assert re.search(r"^\s+server spark-2 192\.168\.200\.12:8000 maxconn 8( agent-check .*)?$", cfg, re.M)
    assert re.search(r"^\s+timeout queue 120s$", cfg, re.M)
    assert "errorfile 503 /etc/haproxy/errors/gb10-503-queue.http" in cfg


def test_admin_socket_and_stats_on_loopback_only():
    cfg = render()
    assert "stats socket /run/haproxy/admin.sock mode 600 level admin" in cfg
    stats = cfg[cfg.index("frontend gb10_stats") :]
    assert "bind 127.0.0.1:8404" in stats and "use-service prometheus-exporter" in stats


def test_prometheus_endpoint_on_the_fabric_serves_only_metrics():
    # roles/monitoring's Prometheus scrapes HAProxy from its own node, so this one listener is on the fabric.
    cfg = render()
    metrics = cfg[cfg.index("frontend gb10_metrics") :]
    assert re.search(r"^\s+bind 192\.168\.200\.11:8405$", metrics, re.M)
    rules = re.findall(r"^\s+http-request (.*)$", metrics, re.M)
    assert rules == ["use-service prometheus-exporter if { path /metrics }", "deny deny_status 404"]
    assert "stats enable" not in metrics
    assert "frontend gb10_metrics" not in render(gb10_proxy_metrics_port=0)


@NEEDS_HAPROXY
def test_prometheus_endpoint_on_the_fabric_passes_haproxy_check(tmp_path):
    for port in (8405, 0):
        (tmp_path / str(port)).mkdir()
        checked = LiveHAProxy(tmp_path / str(port), gb10_proxy_metrics_port=port).check()
        assert checked.returncode == 0, checked.stdout + checked.stderr


def test_pitfall_proxy_max_fails_lockout_after_both_backends_return():
    # Seed 002: nginx marked both upstreams failed while they were down (max_fails=3, fail_timeout=30s) and
    # answered "502 no live upstreams" for ~30 s after both were back. Here servers change state by active
    # health checks only, and one passed check (2 s apart) puts a returning replica back in use.
    cfg = render()
    for passive in ("observe ", "error-limit", "on-error", "on-marked-down", "slowstart"):
        assert passive not in cfg
    default_server = re.search(r"^\s+default-server (.*)$", cfg, re.M).group(1).split()
    opts = dict(zip(default_server[1::2], default_server[2::2], strict=False))
    assert default_server[0] == "check" and "option httpchk GET /health" in cfg
    assert int(opts["rise"]) == 1 and opts["inter"] == opts["downinter"] == "2s"
    assert "option redispatch" in cfg and "retry-on conn-failure" in cfg
