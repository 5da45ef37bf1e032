# Copyright: gb10.serving maintainers
# Apache-2.0
"""The part every tiny local HTTP server of the tests shares (a replica, a metrics endpoint, a Prometheus API)."""

from __future__ import annotations

import json
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

    def send_stream(self, words=("a", "b", "c")):
        """A streamed chat completion as vLLM's OpenAI server sends it: one delta a word, the usage, [DONE]."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for word in words:
            chunk = {"choices": [{"index": 0, "delta": {"content": word}}]}
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        usage = {"choices": [], "usage": {"completion_tokens": len(words)}}
        self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
