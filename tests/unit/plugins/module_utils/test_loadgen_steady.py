# Copyright: gb10.serving maintainers
# Apache-2.0
"""The steady load of the rolling-upgrade tests: plain and streaming requests, 5xx and cut streams are failures."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import _loadgen


class Fake(BaseHTTPRequestHandler):
    mode = "ok"

    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if Fake.mode == "503":
            self.send_response(503)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")
            return
        if not body.get("stream"):
            data = json.dumps({"choices": [{"message": {"content": "hi"}}], "usage": {"completion_tokens": 2}})
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data.encode())
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(b'data: {"choices": [{"index": 0, "delta": {"content": "a"}}]}\n\n')
        if Fake.mode == "cut":
            return
        self.wfile.write(b'data: {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}\n\n')
        self.wfile.write(b"data: [DONE]\n\n")


@pytest.fixture
def server():
    Fake.mode = "ok"
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Fake)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_steady_sends_plain_and_streaming_until_stopped(server):
    load = _loadgen.Steady(server, "m", concurrency=2, timeout=5, pause_s=0.01).start()
    time.sleep(0.5)
    records = load.stop()
    assert {r["stream"] for r in records} == {True, False}
    assert records and not _loadgen.failures(records)
    assert all(r["status"] == 200 for r in records)


def test_5xx_is_a_failure(server):
    Fake.mode = "503"
    rec = _loadgen.plain_request(server, "m", "hi", 4, 5)
    assert rec["status"] == 503 and not rec["ok"]
    assert _loadgen.failures([rec]) == [rec]


def test_a_stream_cut_short_is_a_failure_when_a_finish_is_required(server):
    Fake.mode = "cut"
    assert _loadgen.one_request(server, "m", "hi", 4, 5)["ok"]
    rec = _loadgen.one_request(server, "m", "hi", 4, 5, require_finish=True)
    assert not rec["ok"] and "cut short" in rec["error"]
