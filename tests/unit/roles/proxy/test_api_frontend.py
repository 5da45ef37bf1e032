# Copyright: gb10.serving maintainers
# Apache-2.0
"""The public frontend closed by default (issue 18, item 2), against a real HAProxy 2.6 (Debian's, what the nodes
run) on the role's rendered configuration: 401 without the key, 200 with it, /health without it, nothing but /v1/* and
/health served, TLS only when a certificate is given (the simulation's own, verified by its clients, with the replicas'
checks still plain HTTP); the key never in haproxy.cfg."""

from __future__ import annotations

import http.server
import json
import socket
import ssl
import threading
import urllib.error
import urllib.request

import jinja2
import pytest
import yaml
from haproxy_render import NEEDS_HAPROXY, ROLE, LiveHAProxy, free_port, render
from http_stub import QuietHandler
from tls_material import sim_tls

KEY = "unit-canary-3f9c"


class _Replica(QuietHandler):
    """A replica that answers every path 200 (as vLLM does /metrics and /tokenize without a key): what comes back
    refused is the proxy's doing."""

    def _answer(self):
        body = json.dumps({"path": self.path, "authorization": self.headers.get("Authorization")}).encode()
        self.send_body(body, "application/json")

    do_GET = do_POST = _answer


@pytest.fixture
def replica():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _Replica)
    server.handle_error = lambda *args: None  # HAProxy's health checks close without reading the answer
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def ask(url, key=None, method="GET", context=None):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    data = b"{}" if method == "POST" else None
    request = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as refused:
        return refused.code, refused.headers.get("WWW-Authenticate")


def started(tmp_path, port, **overrides):
    proxy = LiveHAProxy(tmp_path, max_seqs=(4,), api_key=KEY, replica_port=port, **overrides)
    checked = proxy.check()
    assert checked.returncode == 0, checked.stdout + checked.stderr
    return proxy.start()


@NEEDS_HAPROXY
def test_public_frontend_wants_the_key_and_serves_only_v1_and_health(tmp_path, replica):
    proxy = started(tmp_path, replica)
    try:
        base = f"http://127.0.0.1:{proxy.port}"
        assert "Bearer " + KEY not in proxy.config.read_text()
        assert ask(f"{base}/v1/models") == (401, "Bearer")
        assert ask(f"{base}/v1/models", key="wrong") == (401, "Bearer")
        status, seen = ask(f"{base}/v1/chat/completions", key=KEY, method="POST")
        assert status == 200 and seen["authorization"] == f"Bearer {KEY}"
        assert ask(f"{base}/health")[0] == 200
        for path in ("/metrics", "/tokenize", "/invocations", "/docs", "/v1"):
            assert ask(f"{base}{path}", key=KEY)[0] == 404, path
    finally:
        proxy.stop()


@NEEDS_HAPROXY
def test_prometheus_endpoint_on_the_fabric_answers_metrics_and_nothing_else(tmp_path, replica):
    proxy = started(tmp_path, replica)
    try:
        base = f"http://127.0.0.1:{proxy.metrics_port}"
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as answer:
            text = answer.read().decode()
        assert answer.status == 200 and "haproxy_backend_active_servers" in text
        for path in ("/stats", "/v1/models", "/health"):
            assert ask(f"{base}{path}", key=KEY)[0] == 404, path
    finally:
        proxy.stop()


@NEEDS_HAPROXY
def test_anonymous_frontend_only_when_asked_still_only_v1_and_health(tmp_path, replica):
    proxy = started(tmp_path, replica, _proxy_anonymous=True)
    try:
        base = f"http://127.0.0.1:{proxy.port}"
        assert ask(f"{base}/v1/models")[0] == 200
        assert ask(f"{base}/metrics")[0] == 404
    finally:
        proxy.stop()


def https_status(port, name, path, context, key=None):
    """The status of GET ``path`` over TLS to the HAProxy on loopback ``port``, asking for ``name`` (SNI and the
    host-name check: the simulation's certificate names the simulation's addresses, not loopback)."""
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    plain = socket.create_connection(("127.0.0.1", port), timeout=5)
    with plain, context.wrap_socket(plain, server_hostname=name) as tls:
        tls.sendall(f"GET {path} HTTP/1.1\r\nHost: {name}\r\n{auth}Connection: close\r\n\r\n".encode())
        answer = b""
        while chunk := tls.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1])


@NEEDS_HAPROXY
def test_tls_with_the_simulations_certificate(tmp_path, replica):
    """sim/tls.py's CA and certificate, as `make sim` serves them: a client trusting that CA reaches the API under
    every name the certificate holds (401 without the key, 200 with it); one that does not trust it, or asks for a
    name the certificate does not hold, fails verification; plain HTTP on the port gets no answer."""
    ca, pem = sim_tls(tmp_path / "tls")
    proxy = started(tmp_path, replica, _proxy_tls_cert=str(pem))
    try:
        trusted = ssl.create_default_context(cafile=str(ca))
        for name in ("10.77.0.10", "10.77.0.11", "10.77.0.12", "spark-1"):
            assert https_status(proxy.port, name, "/v1/models", trusted) == 401, name
            assert https_status(proxy.port, name, "/v1/models", trusted, key=KEY) == 200, name
            assert https_status(proxy.port, name, "/health", trusted) == 200, name
        with pytest.raises(ssl.SSLCertVerificationError, match="unable to get local issuer certificate"):
            https_status(proxy.port, "10.77.0.10", "/health", ssl.create_default_context())
        with pytest.raises(ssl.SSLCertVerificationError, match="IP address mismatch"):
            https_status(proxy.port, "10.77.0.99", "/health", trusted)
        with pytest.raises(OSError):  # plain HTTP on the TLS port: the connection is closed
            ask(f"http://127.0.0.1:{proxy.port}/health")
    finally:
        proxy.stop()


def test_the_key_file_is_named_and_no_key_check_when_anonymous():
    closed = render()
    assert "req.fhdr(authorization) -m str -f /etc/haproxy/gb10-api-keys" in closed
    assert "path_beg /v1/" in closed
    assert "authorization" not in render(_proxy_anonymous=True)


def test_the_public_bind_speaks_tls_only_with_a_certificate_and_the_replicas_stay_plain():
    plain = render()
    assert "    bind *:8080\n" in plain and "ssl" not in plain
    tls = render(_proxy_tls_cert="/etc/haproxy/gb10-tls.pem")
    assert "    bind *:8080 ssl crt /etc/haproxy/gb10-tls.pem\n" in tls
    backend = tls.split("backend vllm", 1)[1].split("frontend gb10_stats", 1)[0]
    assert "option httpchk GET /health" in backend and "ssl" not in backend  # checks and replicas: plain HTTP
    assert "    server spark-1 192.168.200.11:8000 maxconn 12" in backend
    stats = tls.split("frontend gb10_stats", 1)[1]
    assert "bind 127.0.0.1:8404\n" in stats and "ssl" not in stats


@pytest.mark.parametrize(
    ("cert", "src", "served"),
    [
        ("", "", ""),
        ("/etc/gb10/proxy.pem", "", "/etc/gb10/proxy.pem"),
        ("", "files/proxy.pem", "/etc/haproxy/gb10-tls.pem"),
        ("/etc/gb10/proxy.pem", "files/proxy.pem", "/etc/gb10/proxy.pem"),
    ],
    ids=["plain", "placed on the node", "copied to the default path", "copied to the given path"],
)
def test_the_pem_the_frontend_serves(cert, src, served):
    """vars/main.yml's _proxy_tls_cert: proxy_tls_cert where given, else the default node path when the control
    machine gives the PEM (proxy_tls_cert_src), else none (plain HTTP)."""
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    given = {
        "proxy_tls_cert": cert,
        "proxy_tls_cert_src": src,
        "_proxy_tls_cert_copied": role_vars["_proxy_tls_cert_copied"],
    }
    assert jinja2.Environment().from_string(role_vars["_proxy_tls_cert"]).render(**given) == served
