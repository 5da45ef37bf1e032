"""`vllm` console script of the stand-in: ``vllm serve MODEL [options]`` and ``vllm --version``.

Start-up order and log lines follow vLLM 0.32.0: argv (exit 2 on a parser error), engine arguments (exit 1 with
the Python exception vLLM raises), the model (read in full), then the HTTP server and "Application startup
complete.". SIGTERM stops accepting, lets in-flight requests finish (GB10_STANDIN_DRAIN_S, default 30) and exits 0.
GB10_STANDIN_STARTUP_S (default 3) is the engine's fixed start-up time before the shards are read. After the
weights, vLLM's profiling pass: an MoE model gets FlashInfer's fused-MoE module, built at MAX_JOBS unless the
mounted cache holds it (jit.py), then the KV cache is sized, refused or made resident (memory.py).
"""

from __future__ import annotations

import hashlib
import os
import signal
import sys
import threading
import time

from vllm._standin import argv as av
from vllm._standin import engine as eng
from vllm._standin import jit
from vllm._standin import memory as mem
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
        config["kv_cache_dtype"] = given.get("kv_cache_dtype")
        config["api_key"] = given.get("api_key")
        # What a greedy answer follows besides the prompt (engine.answer_words): the weights and their dtype.
        config["dtype"] = str(given.get("dtype") or "auto")
        config["kv_cache_memory_bytes"] = (
            av._human_int("--kv-cache-memory-bytes", given["kv_cache_memory_bytes"])
            if given.get("kv_cache_memory_bytes") is not None
            else None
        )
    except (av.ArgvError, TypeError, ValueError) as exc:
        return fail(f"{type(exc).__name__}: {exc}")
    return serve(config)


def profile_and_size_kv(config, loaded):
    """vLLM's profiling pass (the fused-MoE JIT of an MoE model) and its KV cache; (kv or None, resident buffer).

    Raises memory.KVCacheError as vLLM raises its ValueError when one request of max_model_len does not fit.
    """
    gpu = mem.fake_gpu()
    hf_config = mem.read_config(config["model"])
    if jit.is_moe(hf_config):
        jit.ensure_fused_moe(gpu["capability"], lambda m: log(m, where="fused_moe.py:1"))
    tp = max(1, config["tensor_parallel_size"])
    per_token = mem.kv_bytes_per_token(hf_config, config.get("kv_cache_dtype"), tp)
    if per_token is None:
        log("config.json gives no attention shape: the KV cache is not sized", level="WARNING", where="memory.py:1")
        return None, None
    max_len = config["max_model_len"] or int(hf_config.get("max_position_embeddings") or 8192)
    kv = mem.size_kv_cache(
        gpu=gpu,
        gpu_memory_utilization=config["gpu_memory_utilization"],
        weights_bytes=loaded // tp,
        max_model_len=max_len,
        per_token=per_token,
        max_num_seqs=config["max_num_seqs"],
        kv_cache_memory_bytes=config.get("kv_cache_memory_bytes"),
        resident_limit_bytes=int(_env_float("GB10_STANDIN_KV_RESIDENT_LIMIT_MIB", 256) * mem.MIB),
    )
    for where, line in mem.log_lines(kv, max_len):
        log(line, where=where)
    return kv, mem.touch(kv["resident"])


RANK_LOSS = ("exit", "hang")


def rank_lost(mode, engine, dead, stop):
    """What a lost tensor-parallel rank does to the engine (GB10_STANDIN_RANK_LOSS).

    exit (the default): vLLM's engine core sees the Ray worker die and raises EngineDeadError; the API server then
    exits non-zero (vLLM's launcher shuts down on it unless VLLM_KEEP_ALIVE_ON_ENGINE_DEATH). hang: the field's
    wedge on GB10 clusters (vllm-project/vllm#16259, #53157): the engine core never notices, /health and
    /v1/models keep answering 200 and no request generates a token; only a completion shows it.
    """

    def on_dead(reason):
        if mode == "hang":
            log(
                f"(stand-in) a tensor-parallel rank is gone; GB10_STANDIN_RANK_LOSS=hang: the engine core waits on "
                f"it and generates nothing while /health stays 200 (vllm-project/vllm#16259): {reason}",
                level="WARNING",
                where="ray_executor.py:1",
            )
            engine.wedged.set()
            return
        log(
            f"EngineCore encountered a fatal error: a tensor-parallel rank is gone: {reason}",
            level="ERROR",
            where="core.py:1",
        )
        dead.append(reason)
        stop.set()

    return on_dead


def serve(config):
    rank_loss = os.environ.get("GB10_STANDIN_RANK_LOSS") or "exit"
    if rank_loss not in RANK_LOSS:
        return fail(f"ValueError: GB10_STANDIN_RANK_LOSS={rank_loss!r}: expected one of {', '.join(RANK_LOSS)}")
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
    ranks = None
    try:
        if config["tensor_parallel_size"] > 1:
            reports, ranks = tpmod.start(config, config["model"], log)
            loaded = sum(rank["bytes"] for rank in reports)
        else:
            weights = hashlib.sha256()
            loaded, _load_s = mdl.load(config["model"], print, weights)
            config["weights_digest"] = weights.hexdigest()
    except (mdl.ModelError, tpmod.TPError) as exc:
        return fail(exc)
    elapsed = time.monotonic() - started
    log(f"Loading weights took {elapsed:.2f} seconds", where="default_loader.py:384")
    log(f"Model loading took {loaded / 2**30:.4f} GiB memory and {elapsed:.6f} seconds", where="gpu_model_runner.py:1")
    try:
        kv, kv_resident = profile_and_size_kv(config, loaded)
    except mem.KVCacheError as exc:
        return fail(f"ValueError: {exc}")
    except RuntimeError as exc:
        return fail(f"RuntimeError: {exc}")

    engine = eng.Engine(config)
    engine.kv, engine.kv_resident = kv, kv_resident
    try:
        server = srv.make_server(
            engine,
            config["host"],
            config["port"],
            log_line=lambda m: log(m, where="h11.py:1"),
            api_keys=srv.api_keys_from(config.get("api_key"), os.environ),
        )
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
    dead = []
    if ranks is not None:
        tpmod.watch(ranks, rank_lost(rank_loss, engine, dead, stop), log)
    while not stop.wait(1):
        pass
    if dead:
        server.shutdown()
        server.server_close()
        return fail("EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.")
    log("Shutting down FastAPI HTTP server.")
    server.shutdown()
    deadline = time.monotonic() + _env_float("GB10_STANDIN_DRAIN_S", 30)
    while (engine.gate.running or engine.gate.waiting) and time.monotonic() < deadline:
        time.sleep(0.2)
    server.server_close()
    return 0


def entry():
    sys.exit(main())
