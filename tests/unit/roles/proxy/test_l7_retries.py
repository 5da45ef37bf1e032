# Copyright: gb10.serving maintainers
# Apache-2.0
"""HAProxy's L7 retries (issue 36 item 3), live: Debian's HAProxy 2.6 on the role's rendered configuration in front
of two replicas on loopback. One dies under every generation it is sent: it reads the request, then closes the
connection without a byte of answer (as a replica killed mid-request does), while its /health keeps answering 200,
so the proxy keeps sending it requests. Every such request is answered by the other replica; a stream whose first
byte has gone out is not retried (the client sees it cut); a request larger than proxy_request_buffer is not either.
"""

from __future__ import annotations

import http.server
import json
import threading
import urllib.error
import urllib.request

from haproxy_render import NEEDS_HAPROXY, LiveHAProxy, free_port, render
from test_affinity import KEY, Replica, servers, wait_until

BUFFER = 16384


class DyingReplica:
    """/health 200; a POST is read whole, then the connection is closed with nothing sent (``mode`` "empty"), or
    after the headers and one event of a stream (``mode`` "stream")."""

    def __init__(self, mode="empty"):
        self.mode, self.posts = mode, 0
        replica = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                body = b"ok"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                replica.posts += 1
                if replica.mode == "stream":
                    self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n")
                    self.wfile.write(b"Transfer-Encoding: chunked\r\n\r\n")
                    event = b'data: {"choices":[{"delta":{"content":"hel"}}]}\n\n'
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                    self.wfile.flush()
                self.close_connection = True  # and nothing (more) is sent: the replica died

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.server.handle_error = lambda *args: None
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def _post(proxy, size=64):
    """A chat request through the proxy with a body of about ``size`` bytes: (status, body or the error)."""
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * size}], "stream": True}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{proxy.port}/v1/chat/completions",
        data=body,
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=20) as answer:
            status = answer.status
            return status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, ""
    except Exception as cut:  # a stream cut under the client: what it saw is the finding
        return "cut", type(cut).__name__


def _live(tmp_path, mode):
    dying, good = DyingReplica(mode), Replica("spark-2")
    proxy = LiveHAProxy(
        tmp_path,
        max_seqs=(4, 4),
        api_key=KEY,
        replica_port=[dying.port, good.port],
        proxy_check_inter="500ms",
        proxy_request_buffer=BUFFER,
    )
    checked = proxy.check()
    assert checked.returncode == 0, checked.stdout + checked.stderr
    proxy.start()
    wait_until(
        lambda: all(state["up"] for (backend, _server), state in servers(proxy).items() if backend == "vllm"),
        "both up",
        seconds=15,
    )
    return dying, good, proxy


def test_the_rendered_backend_retries_on_another_replica():
    text = render()  # the role's defaults
    assert "    retry-on conn-failure empty-response junk-response 502 503\n" in text
    assert "    option redispatch 1\n" in text and "    option http-buffer-request\n" in text
    assert "    tune.bufsize 65536\n" in text


@NEEDS_HAPROXY
def test_pitfall_replica_killed_mid_request_costs_no_request_that_got_no_byte(tmp_path):
    dying, good, proxy = _live(tmp_path, "empty")
    try:
        seen = [_post(proxy) for _request in range(12)]
        assert dying.posts >= 3, f"the proxy sent the dying replica {dying.posts} requests: nothing was retried"
        assert all(status == 200 and '"replica": "spark-2"' in body for status, body in seen), seen
        # a request larger than the buffer cannot be kept for a retry: served as usual, never retried
        large = [_post(proxy, size=BUFFER * 2) for _request in range(6)]
        statuses = sorted(str(status) for status, _body in large)
        assert "502" in statuses and "200" in statuses, large
    finally:
        proxy.stop()
        dying.stop()
        good.stop()


@NEEDS_HAPROXY
def test_a_stream_whose_first_byte_went_out_is_not_retried(tmp_path):
    dying, good, proxy = _live(tmp_path, "stream")
    try:
        seen = [_post(proxy) for _request in range(8)]
        cut = [s for s in seen if s[0] == "cut" or (s[0] == 200 and "spark-2" not in s[1])]
        assert dying.posts >= 1 and len(cut) == dying.posts, (dying.posts, seen)
        assert all(status == 200 and "spark-2" in body for status, body in seen if (status, body) not in cut), seen
    finally:
        proxy.stop()
        dying.stop()
        good.stop()
