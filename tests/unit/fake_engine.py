# Copyright: gb10.serving maintainers
# Apache-2.0
"""A real HTTP server on localhost standing in for vLLM's /health and POST /v1/completions (the watchdog's and
engine_ready's probe), each answer settable while it runs."""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextmanager
def fake_engine():
    """Yields (base URL, state). state, settable:

    health: the status of GET /health; ok_after: when set, /health answers 503 until that many GETs were made, then
    200 (an engine loading); completion: "ok" (one choice), "hang" (nothing for ``hang_s``: a frozen engine core),
    "500", "empty" (200 without a choice), "busy" (like hang, but each GET /metrics finds more generated tokens: every
    slot taken by running requests); key: when set, /v1 wants ``Authorization: Bearer <key>`` and answers
    vLLM's 401 otherwise; generated: vllm:generation_tokens_total on GET /metrics; raylet: (status, body) of Ray's
    agent's GET /api/local_raylet_healthz. Read back: gets (GETs of /health), posts ((path, body, Authorization) of
    each POST).
    """
    state = {"health": 200, "ok_after": None, "completion": "ok", "key": None, "hang_s": 3.0, "gets": 0, "posts": []}
    state["generated"] = 100.0
    state["raylet"] = (200, b"success")
    release = threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, status, body=b""):
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/metrics":
                if state["completion"] == "busy":
                    state["generated"] += 7
                text = f'vllm:generation_tokens_total{{model_name="tiny-moe"}} {state["generated"]}\n'
                return self._answer(200, ("# TYPE vllm:generation_tokens counter\n" + text).encode())
            if self.path == "/api/local_raylet_healthz":
                return self._answer(*state["raylet"])
            if self.path != "/health":
                return self._answer(404)
            state["gets"] += 1
            if state["ok_after"] is None:
                return self._answer(state["health"])
            return self._answer(200 if state["gets"] > state["ok_after"] else 503)

        def do_POST(self):
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            state["posts"].append((self.path, request, self.headers.get("Authorization")))
            if state["key"] and self.headers.get("Authorization") != f"Bearer {state['key']}":
                return self._answer(401, b'{"error": "Unauthorized"}')
            mode = state["completion"]
            if mode in ("hang", "busy"):
                release.wait(state["hang_s"])
                return self._answer(200, json.dumps({"choices": [{"text": "late"}]}).encode())
            if mode == "500":
                return self._answer(500, b'{"error": "EngineDeadError"}')
            choices = [] if mode == "empty" else [{"index": 0, "text": " the", "finish_reason": "length"}]
            return self._answer(200, json.dumps({"object": "text_completion", "choices": choices}).encode())

        def log_message(self, *_args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        release.set()
        server.shutdown()
        server.server_close()
