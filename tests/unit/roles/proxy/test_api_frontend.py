# Copyright: gb10.serving maintainers
# Apache-2.0
"""The public frontend closed by default (issue 18, item 2), against a real HAProxy 2.6 (Debian's, what the nodes
run) on the role's rendered configuration: 401 without the key, 200 with it, /health without it, nothing but /v1/* and
/health served, TLS when a certificate is given; the key never in haproxy.cfg."""

from __future__ import annotations

import http.server
import json
import ssl
import subprocess
import threading
import urllib.error
import urllib.request

import pytest
from haproxy_render import NEEDS_HAPROXY, LiveHAProxy, free_port, render

KEY = "unit-canary-3f9c"


class _Replica(http.server.BaseHTTPRequestHandler):
    """A replica that answers every path 200 (as vLLM does /metrics and /tokenize without a key): what comes back
    refused is the proxy's doing."""

    def _answer(self):
        body = json.dumps({"path": self.path, "authorization": self.headers.get("Authorization")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args):
        pass


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
def test_anonymous_frontend_only_when_asked_still_only_v1_and_health(tmp_path, replica):
    proxy = started(tmp_path, replica, _proxy_anonymous=True)
    try:
        base = f"http://127.0.0.1:{proxy.port}"
        assert ask(f"{base}/v1/models")[0] == 200
        assert ask(f"{base}/metrics")[0] == 404
    finally:
        proxy.stop()


@NEEDS_HAPROXY
def test_tls_when_a_certificate_is_given(tmp_path, replica):
    pem = tmp_path / "proxy.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=gb10-proxy", "-days", "1"),
            *("-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem")),
        ],
        check=True,
        capture_output=True,
    )
    pem.write_text((tmp_path / "cert.pem").read_text() + (tmp_path / "key.pem").read_text())
    proxy = started(tmp_path, replica, proxy_tls_cert=str(pem))
    try:
        context = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
        context.check_hostname = False
        base = f"https://127.0.0.1:{proxy.port}"
        assert ask(f"{base}/v1/models", context=context) == (401, "Bearer")
        assert ask(f"{base}/v1/models", key=KEY, context=context)[0] == 200
        with pytest.raises(OSError):  # plain HTTP on the TLS port: the connection is closed
            ask(f"http://127.0.0.1:{proxy.port}/health")
    finally:
        proxy.stop()


def test_the_key_file_is_named_and_no_key_check_when_anonymous():
    closed = render()
    assert "req.fhdr(authorization) -m str -f /etc/haproxy/gb10-api-keys" in closed
    assert "path_beg /v1/" in closed and "ssl crt" not in closed
    assert "authorization" not in render(_proxy_anonymous=True)
    assert "bind *:8080 ssl crt /etc/gb10/proxy.pem" in render(proxy_tls_cert="/etc/gb10/proxy.pem")
