#!/usr/bin/python3
"""Placeholder engine for the molecule serving scenario (until it uses the vLLM stand-in image):
`vllm serve DIR --host H --port P ...` answers /health,
/v1/models, /v1/chat/completions (names the node); `ray start ... --block` sleeps."""

import json
import os
import signal
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

prog = os.path.basename(sys.argv[0])
argv = ([prog] if prog in ("vllm", "ray") else []) + sys.argv[1:]
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
if argv[:2] == ["ray", "start"]:
    while True:
        time.sleep(3600)
if argv[:2] != ["vllm", "serve"]:
    print("placeholder: unknown argv", argv, file=sys.stderr)
    sys.exit(2)
host = argv[argv.index("--host") + 1] if "--host" in argv else "0.0.0.0"
port = int(argv[argv.index("--port") + 1]) if "--port" in argv else 8000
name = argv[argv.index("--served-model-name") + 1] if "--served-model-name" in argv else argv[2]
delay = float(os.environ.get("PLACEHOLDER_DELAY", "0.3"))


class H(BaseHTTPRequestHandler):
    def _send(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            return self._send(200, {})
        if self.path == "/v1/models":
            return self._send(200, {"object": "list", "data": [{"id": name, "object": "model"}]})
        self._send(404, {"error": "not found"})

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", "0") or 0))
        time.sleep(delay)
        self._send(
            200,
            {
                "object": "chat.completion",
                "model": name,
                "node": socket.gethostname(),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
            },
        )


ThreadingHTTPServer((host, port), H).serve_forever()
