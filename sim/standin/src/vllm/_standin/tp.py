"""Tensor parallelism over a real Ray cluster (Ray runs on CPU; every node offers one logical GPU).

Follows vLLM 0.32.0's ``--distributed-executor-backend ray`` start-up (vllm/v1/executor/ray_utils.py and
ray_executor.py): join the running cluster, refuse a driver node without a free GPU, create a PACK placement group
of one {"GPU": 1} bundle per rank whose first bundle is pinned to ``node:<VLLM_HOST_IP>``, wait for it with
exponential back-off and fail after the timeout (GB10_STANDIN_RAY_WAIT_S stands for vLLM's PG_WAIT_TIMEOUT of
1800 s), check the driver's node holds a bundle, start one rank per bundle, which loads the shards from ITS OWN
node's disk (seed 004 pitfall 6: nothing is shared between nodes), and apply vLLM's unique-address check.

Where real vLLM would not fail but hang (a rank whose Ray node address differs from its ``VLLM_HOST_IP``: NCCL
then waits on an address nobody listens on, seed 000), the stand-in fails at once and says so. The ranks stay
alive as Ray actors for the life of the server; when one dies (its node's Ray stopped), the engine dies with it,
as vLLM's engine core does. The checks are pure functions over plain data (unit-tested without Ray).
"""

from __future__ import annotations

import os
import threading
import time

from vllm._standin import model as mdl

DEVICE = "GPU"


class TPError(Exception):
    """A tensor-parallel start-up failure; ``kind`` is the exception type vLLM raises."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind

    def __str__(self):
        return f"{self.kind}: {self.args[0]}"


def world_size_error(tp, backend):
    """vLLM's refusal of TP > 1 without the Ray backend on a one-GPU node (seed 004 pitfall 4); None if fine."""
    if tp > 1 and backend != "ray":
        return TPError(
            "ValueError",
            f"World size ({tp}) is larger than the number of available GPUs (1) in this node. If this is "
            "intentional and you are using:\n- ray, set '--distributed-executor-backend ray'.\n"
            "- multiprocessing, set '--nnodes' appropriately.",
        )
    return None


def alive_addresses(nodes):
    """{NodeManagerAddress: GPUs} of the alive nodes of ``ray.nodes()``."""
    out = {}
    for node in nodes:
        if node.get("Alive"):
            address = node.get("NodeManagerAddress")
            out[address] = out.get(address, 0) + float((node.get("Resources") or {}).get(DEVICE, 0))
    return out


def placement_specs(tp, driver_ip):
    """vLLM's bundles: one GPU per rank, the first pinned to the driver's node by its address resource."""
    specs = [{DEVICE: 1.0} for _rank in range(tp)]
    specs[0][f"node:{driver_ip}"] = 0.001
    return specs


def driver_node_error(available, node_id, driver_ip):
    """vLLM's refusal of a driver whose own Ray node has no free GPU; None if it has one."""
    if float(available.get(DEVICE, 0)) < 1:
        return TPError(
            "ValueError",
            f"Current node has no {DEVICE} available. current_node_resource={available}. vLLM engine cannot start "
            f"without {DEVICE}. Make sure you have at least 1 {DEVICE} available in a node "
            f"current_node_id={node_id!r} current_ip={driver_ip!r}.",
        )
    return None


def placement_problem(driver_ip, nodes, tp):
    """Why the placement group cannot be ready now (a hint vLLM does not print), or None."""
    alive = alive_addresses(nodes)
    gpus = sum(alive.values())
    if gpus < tp:
        return (
            f"{tp} GPUs needed, {gpus:g} on {len(alive)} alive Ray node(s) {sorted(alive)}: start the Ray worker "
            "of every node of the tensor-parallel group"
        )
    if alive.get(driver_ip, 0) < 1:
        return (
            f"no alive Ray node registered with the driver's address VLLM_HOST_IP={driver_ip} (alive node "
            f"addresses: {sorted(alive)}): start the head's Ray with --node-ip-address={driver_ip}"
        )
    return None


def wait_message(elapsed, specs):
    return (
        f"Waiting for creating a placement group of specs for {int(elapsed)} seconds. specs={specs}. Check "
        "`ray status` and `ray list nodes` to see if you have enough resources, and make sure the IP addresses "
        "used by ray cluster are the same as VLLM_HOST_IP environment variable specified in each node if you are "
        "running on a multi-node."
    )


def placement_timeout_error(specs, wait_s):
    total = sum(spec.get(DEVICE, 0) for spec in specs)
    if total > 1:
        return TPError(
            "ValueError",
            f"Cannot provide a placement group requiring {total} GPUs (placement_group_specs={specs}) within "
            f"{wait_s:g} seconds.\nTensor parallel size may exceed available GPUs in your cluster. Check resources "
            "with `ray status` and `ray list nodes`.\nIf running on K8s with limited GPUs, consider reducing "
            "--tensor-parallel-size to match available GPU resources.",
        )
    return TPError(
        "ValueError",
        f"Cannot provide a placement group of placement_group_specs={specs} within {wait_s:g} seconds. See "
        "`ray status` and `ray list nodes` to make sure the cluster has enough resources.",
    )


def bundles_error(bundles_to_node_id, driver_node_id, group_id):
    """vLLM's _verify_bundles: the driver's node must hold a bundle of the placement group."""
    if driver_node_id not in set(bundles_to_node_id.values()):
        return TPError(
            "RuntimeError",
            f"driver node id {driver_node_id} is not included in a placement group {group_id}. Node id -> bundles "
            f"{bundles_to_node_id}. You don't have enough GPUs available in a current node. Check `ray status` and "
            "`ray list nodes` to see if you have available GPUs in a node `{driver_node_id}` before starting an "
            "vLLM engine.",
        )
    return None


def rank_problem(driver_ip, ranks):
    """Check the per-rank reports (``ip``, ``ray_ip``, ``node_id``, ``error``); a TPError or None.

    ``ip`` is what vLLM's get_ip() returns on the rank (its VLLM_HOST_IP, else the address Ray found),
    ``ray_ip`` the address its Ray node registered with.
    """
    for rank in ranks:
        if rank.get("error"):
            return TPError("RuntimeError", f"ray::RayWorkerProc.initialize_worker() (ip={rank['ip']}) {rank['error']}")
    node_ids = sorted({rank["node_id"] for rank in ranks})
    all_ips = sorted({*(rank["ip"] for rank in ranks), driver_ip})
    if len(node_ids) != len(all_ips):
        return TPError(
            "RuntimeError",
            f"Every node should have a unique IP address. Got {len(node_ids)} nodes with node ids {node_ids} and "
            f"{len(all_ips)} unique IP addresses {set(all_ips)}. Please check your network configuration. If you set "
            "`VLLM_HOST_IP` environment variable, make sure it is unique for each node.",
        )
    for rank in ranks:
        if rank.get("ray_ip") and rank["ray_ip"] != rank["ip"]:
            return TPError(
                "RuntimeError",
                f"(stand-in: real vLLM hangs here in NCCL init) the rank on Ray node {rank['ray_ip']} has "
                f"VLLM_HOST_IP={rank['ip']}: the node's Ray registered under another address than the one its "
                f"collectives use. Start its Ray node with --node-ip-address={rank['ip']}.",
            )
    return None


class Rank:
    """One tensor-parallel rank, a Ray actor on its bundle's node: it loads that node's shards and stays up."""

    def __init__(self, model_path):
        import ray

        self.report = {
            "ip": os.environ.get("VLLM_HOST_IP") or ray.util.get_node_ip_address(),
            "ray_ip": ray.util.get_node_ip_address(),
            "node_id": ray.get_runtime_context().get_node_id(),
            "error": None,
            "bytes": 0,
        }
        try:
            for name in mdl.shard_names(model_path):
                self.report["bytes"] += mdl.read_shard(os.path.join(model_path, name))[1]
        except mdl.ModelError as exc:
            self.report["error"] = str(exc)

    def loaded(self):
        return self.report

    def ping(self):
        return self.report["node_id"]


def _wait_ready(ray, group, specs, wait_s, log, diagnose):
    started = time.monotonic()
    ready_ref = group.ready()
    interval = 10.0
    while True:
        elapsed = time.monotonic() - started
        if elapsed >= wait_s:
            break
        ready, _pending = ray.wait([ready_ref], timeout=min(interval, wait_s - elapsed))
        if ready:
            return
        interval *= 2
        log(wait_message(time.monotonic() - started, specs))
        hint = diagnose()
        if hint:
            log(f"(stand-in) {hint}", level="WARNING")
    error = placement_timeout_error(specs, wait_s)
    hint = diagnose()
    if hint:
        error.args = (f"{error.args[0]}\n(stand-in) {hint}",)
    raise error


def start(config, model_path, log, wait_s=None):
    """Join Ray, place and start the ranks; return (per-rank reports, actors) or raise TPError."""
    try:
        import ray
        from ray._private.state import available_resources_per_node
        from ray.util import placement_group_table
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
    except ImportError as exc:
        raise TPError("ValueError", f"Failed to import Ray: {exc}.Please install Ray with `pip install ray`.") from exc
    tp = config["tensor_parallel_size"]
    wait_s = float(os.environ.get("GB10_STANDIN_RAY_WAIT_S", "60")) if wait_s is None else wait_s
    ray.init(address="auto", logging_level="WARNING")
    driver_ip = os.environ.get("VLLM_HOST_IP") or ray.util.get_node_ip_address()
    log(f"Connected to Ray cluster; driver IP {driver_ip}", where="ray_utils.py:1")
    if tp > ray.cluster_resources().get(DEVICE, 0):
        log(
            f"The number of required {DEVICE}s exceeds the total number of available {DEVICE}s in the placement group.",
            level="WARNING",
            where="ray_utils.py:2",
        )
    node_id = ray.get_runtime_context().get_node_id()
    error = driver_node_error(available_resources_per_node().get(node_id, {}), node_id, driver_ip)
    if error is not None:
        raise error
    specs = placement_specs(tp, driver_ip)
    group = placement_group(specs, strategy="PACK")
    _wait_ready(ray, group, specs, wait_s, log, lambda: placement_problem(driver_ip, ray.nodes(), tp))
    error = bundles_error(placement_group_table(group)["bundles_to_node_id"], node_id, group.id.hex())
    if error is not None:
        raise error
    actor = ray.remote(num_cpus=0, num_gpus=1)(Rank)
    ranks = [
        actor.options(
            scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=group, placement_group_bundle_index=i)
        ).remote(model_path)
        for i in range(tp)
    ]
    try:
        reports = ray.get([r.loaded.remote() for r in ranks], timeout=wait_s)
    except ray.exceptions.GetTimeoutError as exc:
        raise TPError("RuntimeError", f"the ranks did not load within {wait_s:g} seconds") from exc
    error = rank_problem(driver_ip, reports)
    if error is not None:
        raise error
    for index, rank in enumerate(reports):
        log(f"(RayWorkerWrapper pid=0, ip={rank['ip']}) Worker_TP{index} loaded {rank['bytes']} bytes of shards")
    return reports, ranks


def watch(ranks, on_dead, log, interval_s=5.0, timeout_s=20.0, stop=None):
    """Ping every rank each interval; call ``on_dead(reason)`` once when one stops answering (cli.rank_lost)."""
    import ray

    stop = stop or threading.Event()

    def loop():
        while not stop.wait(interval_s):
            try:
                ray.get([r.ping.remote() for r in ranks], timeout=timeout_s)
            except Exception as exc:  # any Ray failure of a rank: what the engine does is on_dead's
                on_dead(f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
                return

    thread = threading.Thread(target=loop, name="tp-watch", daemon=True)
    thread.start()
    return stop
