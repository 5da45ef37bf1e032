"""The OpenAI-compatible HTTP face: /health, /v1/models, /v1/chat/completions (plain and SSE), /v1/completions
(plain: the watchdog's and engine_ready's one-token probe), /metrics, /version."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from vllm._standin import engine as eng

ROUTES = (
    ("/health", "GET"),
    ("/metrics", "GET"),
    ("/version", "GET"),
    ("/v1/models", "GET"),
    ("/v1/chat/completions", "POST"),
    ("/v1/completions", "POST"),
)


def models_body(engine):
    config = engine.config
    return {
        "object": "list",
        "data": [
            {
                "id": name,
                "object": "model",
                "created": int(time.time()),
                "owned_by": "vllm",
                "root": config["model"],
                "parent": None,
                "max_model_len": engine.max_model_len,
                "permission": [],
            }
            for name in config["served_model_name"]
        ],
    }


def api_keys_from(given_keys, environ):
    """The keys the server accepts, as vLLM 0.32 settles them: ``--api-key`` (nargs +), else ``VLLM_API_KEY``."""
    if given_keys:
        return tuple(given_keys if isinstance(given_keys, (list, tuple)) else [given_keys])
    return (environ["VLLM_API_KEY"],) if environ.get("VLLM_API_KEY") else ()


class Handler(BaseHTTPRequestHandler):
    server_version = "uvicorn"
    sys_version = ""
    engine = None
    log_line = None
    api_keys = ()

    def log_message(self, fmt, *args):
        if self.log_line is not None:
            self.log_line(f'{self.client_address[0]}:{self.client_address[1]} - "{self.requestline}" {args[1]}')

    def _json(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _refused(self):
        """vLLM's AuthenticationMiddleware: with a key, every route under /v1 wants ``Authorization: Bearer <key>``
        (401 ``{"error": "Unauthorized"}`` otherwise); /health, /metrics, /version and the rest stay open."""
        if not self.api_keys or not self.path.split("?", 1)[0].startswith("/v1"):
            return False
        if self.headers.get("Authorization") in {f"Bearer {key}" for key in self.api_keys}:
            return False
        self._json(401, {"error": "Unauthorized"})
        return True

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if self._refused():
            return
        if path == "/health":
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif path == "/metrics":
            data = generate_latest(self.engine.metrics.registry)
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE_LATEST)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif path == "/version":
            self._json(200, {"version": "0.32.0"})
        elif path == "/v1/models":
            self._json(200, models_body(self.engine))
        else:
            self._json(404, {"detail": "Not Found"})

    def do_POST(self):
        if self._refused():
            return
        path = self.path.split("?", 1)[0]
        if path not in ("/v1/chat/completions", "/v1/completions"):
            self._json(404, {"detail": "Not Found"})
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
            request = json.loads(self.rfile.read(length) or b"null")
            if not isinstance(request, dict):
                raise ValueError("the body must be a JSON object")
        except ValueError as exc:
            self._json(400, eng.RequestError(400, "BadRequestError", f"Invalid JSON body: {exc}").body())
            return
        if path == "/v1/completions":
            self._completion(request)
            return
        try:
            self.engine.check(request)
        except eng.RequestError as exc:
            self._json(exc.status, exc.body())
            return
        if request.get("stream"):
            self._stream(request)
        else:
            pieces = []
            summary = self.engine.run(request, lambda kind, text: pieces.append((kind, text)))
            body = eng.completion_body(self.engine.name, pieces, summary, int(time.time()), eng.new_ids())
            self._json(200, body)

    def _completion(self, request):
        """/v1/completions: the prompt goes through the same gate and token clock as a chat request."""
        prompt = request.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            self._json(400, eng.RequestError(400, "BadRequestError", "prompt must be a non-empty string").body())
            return
        if request.get("stream"):
            # A departure: the stand-in streams chat only; nothing of the collection streams a plain completion.
            refused = eng.RequestError(400, "BadRequestError", "the stand-in does not stream /v1/completions")
            self._json(400, refused.body())
            return
        chat = {k: v for k, v in request.items() if k not in ("prompt", "tools", "tool_choice")}
        chat["messages"] = [{"role": "user", "content": prompt}]
        try:
            self.engine.check(chat)
        except eng.RequestError as exc:
            self._json(exc.status, exc.body())
            return
        pieces = []
        summary = self.engine.run(chat, lambda kind, text: pieces.append((kind, text)))
        self._json(200, eng.text_completion_body(self.engine.name, pieces, summary, int(time.time())))

    def _stream(self, request):
        name, created, ids = self.engine.name, int(time.time()), eng.new_ids()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()

        def send(payload):
            self.wfile.write(b"data: " + (payload if isinstance(payload, bytes) else json.dumps(payload).encode()))
            self.wfile.write(b"\n\n")
            self.wfile.flush()

        send(eng.chunk(name, created, ids, {"role": "assistant", "content": ""}))
        summary = self.engine.run(
            request, lambda kind, text: send(eng.chunk(name, created, ids, eng.stream_delta(kind, text, ids)))
        )
        send(eng.chunk(name, created, ids, {"content": ""}, finish=summary["finish_reason"]))
        if (request.get("stream_options") or {}).get("include_usage"):
            usage = {
                "prompt_tokens": summary["prompt_tokens"],
                "total_tokens": summary["prompt_tokens"] + summary["completion_tokens"],
                "completion_tokens": summary["completion_tokens"],
            }
            body = {"id": ids[0], "object": "chat.completion.chunk", "created": created, "model": name}
            send({**body, "choices": [], "usage": usage})
        send(b"[DONE]")


def make_server(engine, host, port, log_line=None, api_keys=()):
    handler = type(
        "StandinHandler",
        (Handler,),
        {"engine": engine, "log_line": staticmethod(log_line) if log_line else None, "api_keys": tuple(api_keys)},
    )
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


def serve_in_thread(server):
    thread = threading.Thread(target=server.serve_forever, name="http", daemon=True)
    thread.start()
    return thread
