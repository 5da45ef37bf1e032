"""Tensor parallelism over a real Ray cluster (Ray runs on CPU; every node offers one logical GPU).

As vLLM 0.32.0 with ``--distributed-executor-backend ray``: join the running cluster (``ray.init(address="auto")``),
wait for a placement group of one {"GPU": 1} bundle per rank with the first bundle on the driver's node
(``VLLM_HOST_IP``), then start one worker per rank on its node, which loads its shards from ITS OWN disk (seed 004
pitfall 6: nothing is shared between nodes). Fails like vLLM when the cluster is short of GPUs, when the driver's
address is not a registered node, when a node registered under an address other than its ``VLLM_HOST_IP``, or
when a rank's node lacks the model. The checks are pure functions over plain data (unit-tested without Ray).
"""

from __future__ import annotations

import os
import time

from vllm._standin import model as mdl


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
            out[address] = out.get(address, 0) + float((node.get("Resources") or {}).get("GPU", 0))
    return out


def placement_problem(driver_ip, nodes, tp):
    """Why a placement group of ``tp`` GPU bundles (first on ``driver_ip``) cannot be created now, or None."""
    alive = alive_addresses(nodes)
    gpus = sum(alive.values())
    if gpus < tp:
        return (
            f"The number of required GPUs exceeds the total number of available GPUs in the placement group: "
            f"{tp} needed, {gpus:g} on {len(alive)} alive node(s) {sorted(alive)}."
        )
    if alive.get(driver_ip, 0) < 1:
        return (
            f"no alive Ray node registered with the driver's address VLLM_HOST_IP={driver_ip} (alive node "
            f"addresses: {sorted(alive)}); make sure the IP addresses used by ray cluster are the same as "
            "VLLM_HOST_IP environment variable specified in each node."
        )
    return None


def rank_problem(driver_ip, ranks):
    """Check the per-rank reports (``ip``, ``node_id``, ``vllm_host_ip``, ``error``) as vLLM does; error or None."""
    for rank in ranks:
        if rank.get("error"):
            return TPError("RuntimeError", f"ray::RayWorkerProc.initialize_worker() (ip={rank['ip']}) {rank['error']}")
    for rank in ranks:
        expected = rank.get("vllm_host_ip")
        if expected and expected != rank["ip"]:
            return TPError(
                "RuntimeError",
                f"ray::RayWorkerProc.initialize_worker() (ip={rank['ip']}) this node registered with Ray as "
                f"{rank['ip']} but its VLLM_HOST_IP is {expected}: start its Ray node with "
                f"--node-ip-address={expected}.",
            )
    worker_ips = [rank["ip"] for rank in ranks]
    if driver_ip not in worker_ips:
        return TPError(
            "ValueError",
            f"Ray does not allocate any GPUs on the driver node.Driver IP: {driver_ip}, worker IPs: {worker_ips}."
            "Consider adjusting the Ray placement group or running the driver on a GPU node.",
        )
    node_ids = sorted({rank["node_id"] for rank in ranks})
    all_ips = {*worker_ips, driver_ip}
    if len(node_ids) != len(all_ips):
        return TPError(
            "RuntimeError",
            f"Every node should have a unique IP address. Got {len(node_ids)} nodes with node ids {node_ids} and "
            f"{len(all_ips)} unique IP addresses {all_ips}. Please check your network configuration. If you set "
            "`VLLM_HOST_IP` environment variable, make sure it is unique for each node.",
        )
    return None


def load_rank(model_path):
    """Run on a rank's own node: read its shards there; report where it ran and what it found."""
    import ray

    report = {
        "ip": ray.util.get_node_ip_address(),
        "node_id": ray.get_runtime_context().get_node_id(),
        "vllm_host_ip": os.environ.get("VLLM_HOST_IP"),
        "error": None,
        "bytes": 0,
    }
    try:
        names = mdl.shard_names(model_path)
        for name in names:
            report["bytes"] += mdl.read_shard(os.path.join(model_path, name))[1]
    except mdl.ModelError as exc:
        report["error"] = str(exc)
    return report


def start(config, model_path, log, wait_s=None):
    """Join Ray, place and start the ranks; return the per-rank reports or raise TPError."""
    try:
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
    except ImportError as exc:
        raise TPError("ValueError", f"Failed to import Ray: {exc}. Please install Ray with `pip install ray`.") from exc
    tp = config["tensor_parallel_size"]
    wait_s = float(os.environ.get("GB10_STANDIN_RAY_WAIT_S", "60")) if wait_s is None else wait_s
    ray.init(address="auto", logging_level="WARNING")
    driver_ip = os.environ.get("VLLM_HOST_IP") or ray.util.get_node_ip_address()
    log(f"Connected to Ray cluster; driver IP {driver_ip}")
    specs = [{"GPU": 1.0} for _ in range(tp)]
    specs[0][f"node:{driver_ip}"] = 0.001
    deadline = time.monotonic() + wait_s
    problem = placement_problem(driver_ip, ray.nodes(), tp)
    while problem is not None:
        if time.monotonic() > deadline:
            raise TPError(
                "ValueError",
                f"Cannot provide a placement group of placement_group_specs={specs} within {wait_s:g} seconds. "
                f"{problem} See `ray status` and `ray list nodes` to make sure the cluster has enough resources.",
            )
        log(f"Waiting for creating a placement group of specs for {wait_s:g} seconds. specs={specs}. {problem}")
        time.sleep(5)
        problem = placement_problem(driver_ip, ray.nodes(), tp)
    group = placement_group(specs, strategy="PACK")
    ray.get(group.ready(), timeout=wait_s)
    remote = ray.remote(num_gpus=1, num_cpus=0)(load_rank)
    refs = [
        remote.options(
            scheduling_strategy=PlacementGroupSchedulingStrategy(placement_group=group, placement_group_bundle_index=i)
        ).remote(model_path)
        for i in range(tp)
    ]
    ranks = ray.get(refs)
    error = rank_problem(driver_ip, ranks)
    if error is not None:
        raise error
    for index, rank in enumerate(ranks):
        log(f"(RayWorkerWrapper pid=0, ip={rank['ip']}) Worker_TP{index} loaded {rank['bytes']} bytes of shards")
    return ranks
