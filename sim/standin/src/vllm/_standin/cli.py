"""`vllm` console script of the stand-in: ``vllm serve MODEL [options]`` and ``vllm --version``.

Start-up order and log lines follow vLLM 0.32.0: argv (exit 2 on a parser error), engine arguments (exit 1 with
the Python exception vLLM raises), the model (read in full), then the HTTP server and "Application startup
complete.". SIGTERM stops accepting, lets in-flight requests finish (GB10_STANDIN_DRAIN_S, default 30) and exits 0.
GB10_STANDIN_STARTUP_S (default 3) is the engine's fixed start-up time before the shards are read.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from vllm._standin import argv as av
from vllm._standin import engine as eng
from vllm._standin import model as mdl
from vllm._standin import server as srv
from vllm._standin import tp as tpmod

TOP_USAGE = "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ..."


def log(message, level="INFO", where="api_server.py:1"):
    stamp = time.strftime("%m-%d %H:%M:%S")
    for line in str(message).splitlines() or [""]:
        print(f"(APIServer pid={os.getpid()}) {level} {stamp} [{where}] {line}", flush=True)


def fail(exc):
    log(f"{exc}", level="ERROR", where="api_server.py:2")
    print(f"{exc}", file=sys.stderr, flush=True)
    return 1


def _env_float(name, default):
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return float(default)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["-v"], ["--version"]):
        print(av.VLLM_VERSION)
        return 0
    if argv[:1] != ["serve"]:
        print(TOP_USAGE, file=sys.stderr)
        print("vllm: error: the only command of this stand-in is serve", file=sys.stderr)
        return 2
    if "-h" in argv[1:] or "--help" in argv[1:]:
        print(av.USAGE)
        return 0
    try:
        given = av.parse(av.load_catalog(), argv[1:])
    except av.ArgvError as exc:
        print(av.USAGE, file=sys.stderr)
        print(f"{av.PROG}: error: {exc}", file=sys.stderr)
        return 2
    log(f"vLLM API server version {av.VLLM_VERSION}", where="api_server.py:1872")
    log(f"non-default args: {given}", where="utils.py:253")
    try:
        config = av.engine_config(given)
    except (av.ArgvError, TypeError, ValueError) as exc:
        return fail(f"{type(exc).__name__}: {exc}")
    return serve(config)


def serve(config):
    env = {k: os.environ.get(k) for k in ("MAX_JOBS", "VLLM_HOST_IP", "HF_HUB_OFFLINE", "CUDA_VISIBLE_DEVICES")}
    log(f"environment: {' '.join(f'{k}={v}' for k, v in env.items() if v is not None)}", where="envs.py:1")
    if not env["MAX_JOBS"]:
        return fail(
            "RuntimeError: MAX_JOBS is not set: FlashInfer's JIT would run one compiler per CPU core (seed 004 "
            "pitfall 7); the serving plan forwards MAX_JOBS to every container"
        )
    error = tpmod.world_size_error(config["tensor_parallel_size"], config["distributed_executor_backend"])
    if error is not None:
        return fail(error)
    if config["limit_mm_per_prompt"] is not None and not any(v for v in config["limit_mm_per_prompt"].values()):
        log("All limits of multimodal modalities supported by the model are set to 0, running in text-only mode.")
    if config["speculative_config"]:
        log(f"speculative_config={config['speculative_config']}", where="config.py:1")
    time.sleep(_env_float("GB10_STANDIN_STARTUP_S", 3))
    started = time.monotonic()
    try:
        if config["tensor_parallel_size"] > 1:
            ranks = tpmod.start(config, config["model"], log)
            loaded = sum(rank["bytes"] for rank in ranks)
        else:
            loaded, _ = mdl.load(config["model"], print)
    except (mdl.ModelError, tpmod.TPError) as exc:
        return fail(exc)
    elapsed = time.monotonic() - started
    log(f"Loading weights took {elapsed:.2f} seconds", where="default_loader.py:384")
    log(f"Model loading took {loaded / 2**30:.4f} GiB memory and {elapsed:.6f} seconds", where="gpu_model_runner.py:1")

    engine = eng.Engine(config)
    try:
        server = srv.make_server(engine, config["host"], config["port"], log_line=lambda m: log(m, where="h11.py:1"))
    except OSError as exc:
        return fail(f"OSError: {exc}")
    log(f"Starting vLLM server on http://{config['host']}:{config['port']}", where="api_server.py:602")
    log("Available routes are:", where="launcher.py:37")
    for path, method in srv.ROUTES:
        log(f"Route: {path}, Methods: {method}", where="launcher.py:46")
    log(f"Started server process [{os.getpid()}]")
    log("Waiting for application startup.")
    srv.serve_in_thread(server)
    log("Application startup complete.")

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(1):
        pass
    log("Shutting down FastAPI HTTP server.")
    server.shutdown()
    deadline = time.monotonic() + _env_float("GB10_STANDIN_DRAIN_S", 30)
    while (engine.gate.running or engine.gate.waiting) and time.monotonic() < deadline:
        time.sleep(0.2)
    server.server_close()
    return 0


def entry():
    sys.exit(main())
