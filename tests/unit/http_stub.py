# Copyright: gb10.serving maintainers
# Apache-2.0
"""The part every tiny local HTTP server of the tests shares (a replica, a metrics endpoint, a Prometheus API)."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler


class QuietHandler(BaseHTTPRequestHandler):
    """A handler that keeps pytest's output the test's own, and answers a whole body in one call."""

    def log_message(self, *args):
        pass

    def send_body(self, body, content_type=None, status=200):
        self.send_response(status)
        if content_type:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
