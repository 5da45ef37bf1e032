"""The pretend engine: a concurrency gate of --max-num-seqs, a token clock, tool calls and vLLM's metrics.

Timing (environment, seconds): GB10_STANDIN_TOKENS_PER_S (steady decode rate per request, default 40),
GB10_STANDIN_WARMUP_S (extra delay before the first token of the first request after start, default 3) and
GB10_STANDIN_WARMUP_SLOWDOWN (the first request decodes this many times slower, default 5): seed 004's first
request ran at ~7 tok/s against ~40 later.

Tool calls are as strict as vLLM's: the model writes them in one format (hermes, ``<tool_call>{json}</tool_call>``,
unless the snapshot's config.json names another under ``gb10_standin_tool_call_format``), and with ``tool_choice``
auto only a ``--tool-call-parser`` of that format extracts them; any other parser leaves the call as raw text in
``content`` with no ``tool_calls`` and finish_reason stop, as vLLM does. A named or required tool choice is
decoded under a schema (guided decoding) and needs no parser.

Text answers are greedy whatever the temperature (a departure: the real engine samples above 0): up to 16 words
drawn from a hash of the prompt, the dtype (--dtype) and the weights' fingerprint (every shard byte read at load;
a tensor-parallel start, whose ranks read the shards, has none and follows the prompt and dtype alone), so two
replicas on the same snapshot and dtype answer alike and another dtype or a changed weight answers otherwise, as
the upgrade's answer check needs (roles/upgrade_node). With ``return_token_ids`` the choice carries a stable id
per piece, as vLLM 0.32's ``token_ids``.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import uuid

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from vllm._standin import recall

LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0)
WORDS = ["the", "quick", "simulated", "engine", "answers", "every", "request", "with", "a", "few", "steady", "tokens"]


class RequestError(Exception):
    """A request vLLM would refuse with an HTTP error (status, error type, message)."""

    def __init__(self, status, kind, message):
        super().__init__(message)
        self.status = status
        self.kind = kind

    def body(self):
        return {"error": {"message": str(self), "type": self.kind, "param": None, "code": self.status}}


def prompt_text(messages):
    """The text of a chat's messages, as the greedy answer reads it (role and content, in order)."""
    parts = []
    for message in messages or []:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        parts.append(f"{message.get('role', '')}:{content or ''}")
    return "\n".join(parts)


def answer_words(prompt, count, dtype="auto", weights=None):
    """The greedy answer of ``count`` words: a function of the prompt, the weights' fingerprint and the dtype only.

    The real engine at temperature 0 answers a prompt the same way every time on the same weights, dtype and
    kernels, and differently where any of them changes (another dtype, a changed weight). The stand-in has no
    network to run: it draws the words from a hash of exactly those inputs, so two replicas on the same snapshot
    and dtype agree word for word and a changed dtype or weight gives another answer (engine.py's module doc)."""
    key = f"{dtype}\0{weights or ''}\0{prompt}".encode()
    stream = b""
    counter = 0
    while len(stream) < count:
        stream += hashlib.sha256(key + counter.to_bytes(4, "big")).digest()
        counter += 1
    return [(" " if i else "") + WORDS[stream[i] % len(WORDS)] for i in range(count)]


def token_id(text):
    """A stable token id for one decoded piece (return_token_ids): the same piece, the same id."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") % 151_000


def _env_float(name, default):
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return float(default)


class Metrics:
    """vLLM's metric names, labelled like the real exporter (model_name, engine)."""

    def __init__(self, model_name):
        self.registry = CollectorRegistry()
        labels = ("model_name", "engine")
        self.labels = {"model_name": model_name, "engine": "0"}
        reg = {"registry": self.registry}
        self.running = Gauge(
            "vllm:num_requests_running", "Number of requests in model execution batches.", labels, **reg
        )
        self.waiting = Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", labels, **reg)
        self.kv_usage = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", labels, **reg)
        self.preemptions = Counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine.", labels, **reg
        )
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.", labels, **reg)
        self.generation_tokens = Counter(
            "vllm:generation_tokens", "Number of generation tokens processed.", labels, **reg
        )
        self.success = Counter(
            "vllm:request_success", "Count of successfully processed requests.", (*labels, "finished_reason"), **reg
        )
        histogram = {"buckets": LATENCY_BUCKETS, **reg}
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels, **histogram
        )
        self.itl = Histogram(
            "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", labels, **histogram
        )
        self.e2e = Histogram(
            "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", labels, **histogram
        )
        self.queue = Histogram(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            labels,
            **histogram,
        )
        for gauge in (self.running, self.waiting, self.kv_usage):
            gauge.labels(**self.labels).set(0)
        for counter in (self.preemptions, self.prompt_tokens, self.generation_tokens):
            counter.labels(**self.labels)
        for reason in ("stop", "length", "abort"):
            self.success.labels(finished_reason=reason, **self.labels)


class Gate:
    """At most ``limit`` requests run at once; the others wait (and are counted as waiting)."""

    def __init__(self, limit, metrics):
        self.limit = limit
        self.metrics = metrics
        self.running = 0
        self.waiting = 0
        self.peak = 0
        self._cond = threading.Condition()

    def _publish(self):
        self.metrics.running.labels(**self.metrics.labels).set(self.running)
        self.metrics.waiting.labels(**self.metrics.labels).set(self.waiting)
        self.metrics.kv_usage.labels(**self.metrics.labels).set(self.running / self.limit)

    def __enter__(self):
        with self._cond:
            self.waiting += 1
            self._publish()
            while self.running >= self.limit:
                self._cond.wait()
            self.waiting -= 1
            self.running += 1
            self.peak = max(self.peak, self.running)
            self._publish()
        return self

    def __exit__(self, *exc):
        with self._cond:
            self.running -= 1
            self._publish()
            self._cond.notify()
        return False


def count_tokens(messages):
    """A stable stand-in for a tokenizer: about one token per four characters of content."""
    text = ""
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
        text += str(content or "") + str(message.get("role", ""))
    return max(1, (len(text) + 3) // 4)


def _example(schema):
    kind = schema.get("type")
    if schema.get("enum"):
        return schema["enum"][0]
    return {"string": "sim", "integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}.get(kind, "sim")


def tool_call_arguments(function):
    """Arguments for ``function`` (an OpenAI tool's function) that satisfy its required parameters."""
    params = function.get("parameters") or {}
    props = params.get("properties") or {}
    names = params.get("required") or list(props)
    return json.dumps({name: _example(props.get(name, {})) for name in names})


DEFAULT_TOOL_CALL_FORMAT = "hermes"
# The --tool-call-parser values that extract each format the stand-in model can write.
PARSERS_OF_FORMAT = {"hermes": frozenset({"hermes"})}


def model_tool_call_format(model_path):
    """The tool-call format the snapshot's model writes: config.json's gb10_standin_tool_call_format, or hermes."""
    try:
        with open(os.path.join(str(model_path), "config.json"), encoding="utf-8") as handle:
            declared = json.load(handle).get("gb10_standin_tool_call_format")
    except (OSError, ValueError, AttributeError):
        declared = None
    return declared if isinstance(declared, str) and declared else DEFAULT_TOOL_CALL_FORMAT


def raw_tool_call_text(function, fmt=DEFAULT_TOOL_CALL_FORMAT):
    """What the model generates for a call of ``function`` in its own format (hermes: <tool_call>{json}</tool_call>)."""
    call = json.dumps({"name": function.get("name", ""), "arguments": json.loads(tool_call_arguments(function))})
    if fmt == "hermes":
        return f"<tool_call>\n{call}\n</tool_call>"
    return call


def parser_extracts(request, config, fmt):
    """True when the server turns the generated call into ``tool_calls``: a named or required choice is guided,
    "auto" needs a --tool-call-parser that reads the model's format."""
    choice = request.get("tool_choice", "auto")
    if isinstance(choice, dict) or choice == "required":
        return True
    return config.get("tool_call_parser") in PARSERS_OF_FORMAT.get(fmt, frozenset({fmt}))


def choose_tool(request, config):
    """The function a request with tools gets called, or None when it should get text."""
    tools = request.get("tools") or []
    if not tools:
        return None
    choice = request.get("tool_choice", "auto")
    if choice == "none":
        return None
    if choice == "auto" and not (config["enable_auto_tool_choice"] and config["tool_call_parser"]):
        raise RequestError(
            400,
            "BadRequestError",
            '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
        )
    functions = [t.get("function") or {} for t in tools if t.get("type", "function") == "function"]
    if isinstance(choice, dict):
        wanted = (choice.get("function") or {}).get("name")
        for function in functions:
            if function.get("name") == wanted:
                return function
        raise RequestError(400, "BadRequestError", f"Tool '{wanted}' has not been passed in `tools`.")
    if not functions:
        raise RequestError(400, "BadRequestError", "tools must hold at least one function")
    return functions[0]


class Engine:
    def __init__(self, config, sleep=time.sleep, clock=time.monotonic):
        self.config = config
        self.name = config["served_model_name"][0]
        self.metrics = Metrics(self.name)
        self.gate = Gate(config["max_num_seqs"], self.metrics)
        self.sleep = sleep
        self.clock = clock
        self.rate = max(0.1, _env_float("GB10_STANDIN_TOKENS_PER_S", 40))
        self.warmup_s = _env_float("GB10_STANDIN_WARMUP_S", 3)
        self.warmup_slowdown = max(1.0, _env_float("GB10_STANDIN_WARMUP_SLOWDOWN", 5))
        self.max_model_len = config["max_model_len"] or 8192
        self.tool_call_format = config.get("tool_call_format") or model_tool_call_format(config.get("model", ""))
        self._first = True
        self._first_lock = threading.Lock()
        # The KV cache sized at startup (memory.size_kv_cache) and the buffer that keeps its share resident.
        self.kv = None
        self.kv_resident = None
        # Set when a tensor-parallel rank is lost under GB10_STANDIN_RANK_LOSS=hang (cli.py): generation waits
        # forever on the lost rank while /health, /v1/models and /metrics keep answering.
        self.wedged = threading.Event()
        self._never = threading.Event()

    def check(self, request):
        """Validate a chat request as vLLM does before queueing it; return (tool function or None, prompt, max)."""
        model = request.get("model") or self.name
        if model not in self.config["served_model_name"]:
            raise RequestError(404, "NotFoundError", f"The model `{model}` does not exist.")
        messages = request.get("messages")
        if not isinstance(messages, list) or not messages:
            raise RequestError(400, "BadRequestError", "messages must be a non-empty list")
        function = choose_tool(request, self.config)
        prompt = count_tokens(messages)
        wanted = request.get("max_completion_tokens") or request.get("max_tokens")
        max_tokens = int(wanted) if wanted else min(64, self.max_model_len - prompt)
        if prompt + max_tokens > self.max_model_len:
            raise RequestError(
                400,
                "BadRequestError",
                f"This model's maximum context length is {self.max_model_len} tokens. However, you requested "
                f"{prompt + max_tokens} tokens ({prompt} in the messages, {max_tokens} in the completion). "
                "Please reduce the length of the messages or completion.",
            )
        return function, prompt, max_tokens

    def pieces(self, function, max_tokens, extracted=True, messages=None):
        """What the request decodes into: ("text", word) pieces, or ("tool", name) then ("args", fragment).

        A call the parser cannot extract (``extracted`` false) comes out as the model's raw call text."""
        if function is not None and not extracted:
            raw = raw_tool_call_text(function, self.tool_call_format)
            cut = max(1, len(raw) // 4)
            return [("text", raw[i : i + cut]) for i in range(0, len(raw), cut)], "stop"
        if function is not None:
            arguments = tool_call_arguments(function)
            cut = max(1, len(arguments) // 3)
            frags = [arguments[i : i + cut] for i in range(0, len(arguments), cut)]
            return [("tool", function.get("name", ""))] + [("args", f) for f in frags], "tool_calls"
        count = max(1, min(max_tokens, 16))
        answer = answer_words(
            prompt_text(messages), count, self.config.get("dtype", "auto"), self.config.get("weights_digest")
        )
        words = [("text", word) for word in answer]
        return words, ("length" if count >= max_tokens else "stop")

    def run(self, request, emit):
        """Run one chat request through the gate; ``emit(kind, text)`` per decoded piece. Returns a summary."""
        function, prompt, max_tokens = self.check(request)
        if self.wedged.is_set():
            # vllm-project/vllm#16259, #53157: the engine core waits on the dead rank; no token, no error, no end
            # (the client's timeout or the process's death ends the request).
            self._never.wait()
        queued = self.clock()
        with self.gate:
            started = self.clock()
            with self._first_lock:
                first, self._first = self._first, False
            delay = 1.0 / self.rate * (self.warmup_slowdown if first else 1.0)
            if first:
                self.sleep(self.warmup_s)
            extracted = parser_extracts(request, self.config, self.tool_call_format)
            pieces, finish = self.pieces(function, max_tokens, extracted, request.get("messages"))
            recalled = recall.answer(request.get("messages")) if function is None else None
            if recalled is not None:
                pieces, finish = [("text", recalled)], "stop"
            first_token_at = None
            last = None
            for kind, text in pieces:
                self.sleep(delay)
                now = self.clock()
                if first_token_at is None:
                    first_token_at = now
                elif last is not None:
                    self.metrics.itl.labels(**self.metrics.labels).observe(now - last)
                last = now
                emit(kind, text)
            done = self.clock()
        labels = self.metrics.labels
        completion = len(pieces)
        self.metrics.prompt_tokens.labels(**labels).inc(prompt)
        self.metrics.generation_tokens.labels(**labels).inc(completion)
        self.metrics.success.labels(finished_reason="stop" if finish == "tool_calls" else finish, **labels).inc()
        self.metrics.queue.labels(**labels).observe(started - queued)
        self.metrics.ttft.labels(**labels).observe(first_token_at - queued)
        self.metrics.e2e.labels(**labels).observe(done - queued)
        summary = {"finish_reason": finish, "prompt_tokens": prompt, "completion_tokens": completion}
        if request.get("return_token_ids"):
            summary["token_ids"] = [token_id(text) for _kind, text in pieces]
        return summary


def new_ids():
    return "chatcmpl-" + uuid.uuid4().hex, "chatcmpl-tool-" + uuid.uuid4().hex[:16]


def completion_body(name, pieces, summary, created, ids):
    """A non-streaming chat.completion shaped like vLLM's (see the tool-call fixture)."""
    chat_id, tool_id = ids
    text = "".join(t for k, t in pieces if k == "text")
    tool_calls = []
    if summary["finish_reason"] == "tool_calls":
        fname = next(t for k, t in pieces if k == "tool")
        arguments = "".join(t for k, t in pieces if k == "args")
        tool_calls = [{"id": tool_id, "type": "function", "function": {"name": fname, "arguments": arguments}}]
    message = {
        "role": "assistant",
        "content": "" if tool_calls else text,
        "refusal": None,
        "annotations": None,
        "audio": None,
        "function_call": None,
        "tool_calls": tool_calls,
        "reasoning": None,
    }
    usage = {
        "prompt_tokens": summary["prompt_tokens"],
        "total_tokens": summary["prompt_tokens"] + summary["completion_tokens"],
        "completion_tokens": summary["completion_tokens"],
        "prompt_tokens_details": None,
    }
    return {
        "id": chat_id,
        "object": "chat.completion",
        "created": created,
        "model": name,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": summary["finish_reason"],
                "stop_reason": None,
                "token_ids": summary.get("token_ids"),
            }
        ],
        "service_tier": None,
        "system_fingerprint": None,
        "usage": usage,
        "prompt_logprobs": None,
        "prompt_token_ids": None,
        "kv_transfer_params": None,
    }


def text_completion_body(name, pieces, summary, created):
    """A non-streaming text_completion (POST /v1/completions) shaped like vLLM's."""
    usage = {
        "prompt_tokens": summary["prompt_tokens"],
        "total_tokens": summary["prompt_tokens"] + summary["completion_tokens"],
        "completion_tokens": summary["completion_tokens"],
        "prompt_tokens_details": None,
    }
    choice = {
        "index": 0,
        "text": "".join(t for k, t in pieces if k == "text"),
        "logprobs": None,
        "finish_reason": summary["finish_reason"],
        "stop_reason": None,
        "prompt_logprobs": None,
    }
    return {
        "id": "cmpl-" + uuid.uuid4().hex,
        "object": "text_completion",
        "created": created,
        "model": name,
        "choices": [choice],
        "service_tier": None,
        "system_fingerprint": None,
        "usage": usage,
        "kv_transfer_params": None,
    }


def chunk(name, created, ids, delta, finish=None):
    """One chat.completion.chunk of the SSE stream (see the streaming fixture)."""
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    if finish is not None:
        choice["stop_reason"] = None
    return {"id": ids[0], "object": "chat.completion.chunk", "created": created, "model": name, "choices": [choice]}


def stream_delta(kind, text, ids):
    if kind == "tool":
        return {"tool_calls": [{"id": ids[1], "type": "function", "index": 0, "function": {"name": text}}]}
    if kind == "args":
        return {"tool_calls": [{"index": 0, "function": {"arguments": text}}]}
    return {"content": text}
