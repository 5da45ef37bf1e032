# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The planning context: the chosen profile, the nodes, the catalog, and every derived value, computed once.

Rules read the context and never derive a value again; the one thing derivation reports itself is a figure
that is not a number (``not_a_number``): it falls back to the default and the rule lists what was found.
"""

from __future__ import annotations

import contextlib
import copy
import ipaddress
import re

from .. import _admission, _memory, _vllm_catalog
from . import argv as _argv
from . import exposure as _exposure
from . import mp as _mp
from . import ray as _ray
from . import tp as _tp
from . import units as _units
from .inputs import secret_env_name
from .violation import ALL_NODES, violation

TOPOLOGIES = ("replicas", "tensor_parallel")
# How a tensor-parallel group is launched: vLLM's own multi-node launch (mp, the default) or a Ray cluster (ray).
LAUNCHERS = ("mp", "ray")
DEFAULT_LAUNCHER = "mp"
# plan role of the head and of the other ranks, by launcher
TP_ROLES = {"mp": ("tp_head", "tp_rank"), "ray": ("ray_head", "ray_worker")}
# The engine containers' own paths, stated once here (issue 41 item 2): roles/serving mounts the node's caches there
# and writes the plan's container_env, the rolling upgrade's drift check compares with that same env,
# roles/flashinfer_jit builds into the same FlashInfer workspace. The HF cache is mounted read-only; transformers keeps
# a trust_remote_code model's code under $HF_HOME/modules by default, so HF_MODULES_CACHE points into the container's
# own layer instead.
CONTAINER_HF_CACHE = "/root/.cache/huggingface"
CONTAINER_HF_MODULES = "/root/.cache/hf-modules"
CONTAINER_FLASHINFER_WORKSPACE = "/root/.cache/flashinfer-workspace"
CONTAINER_VLLM_CACHE = "/root/.cache/vllm-cache"
CONTAINER_PATHS = {
    "hf_cache": CONTAINER_HF_CACHE,
    "hf_modules_cache": CONTAINER_HF_MODULES,
    "flashinfer_workspace_base": CONTAINER_FLASHINFER_WORKSPACE,
    "vllm_cache_root": CONTAINER_VLLM_CACHE,
}
DEFAULT_HF_CACHE = "/var/lib/gb10/hf-cache"
DEFAULT_PORT = 8000


# The engine container's private /dev/shm (issue 39, item 2): Docker's --shm-size, a whole number with b, k, m or g,
# written bare into the unit. A replica and each rank of vLLM's own multi-node launch get one (their processes share
# one container); the Ray launcher's containers use the host's IPC namespace (Ray's object store), and get none.
# The default, 1g, is six times what vLLM's queue was measured to take (MIN_SHM_MIB); the whole size counts in the
# node's memory table, as a tmpfs may fill to it.
SHM_SIZE_RE = re.compile(r"^[1-9][0-9]*[bkmgBKMG]?\Z")
DEFAULT_SHM_SIZE = "1g"
PRIVATE_SHM_ROLES = ("replica", "tp_head", "tp_rank")
# vLLM's shared-memory message queue refused Docker's default 64 MiB ("Insufficient space in /dev/shm ... 160 MiB
# required, 64 MiB free": measured on vLLM 0.32 with the mp launcher's head, sim/vllm_cpu/README.md, commit 011f13f).
MIN_SHM_MIB = 160


# A bind address that names no one host: clients then reach the proxy at the address the plan picks.
WILDCARD_BINDS = ("", "*", "0.0.0.0", "::", "[::]")


def client_api(api):
    """The proxy's public frontend as the plan states it (issue 18, item 2), once for every client of the collection.

    ``api`` as the action plugin gives it: ``{key_set, anonymous, bind, port, tls, ca, client_host, vip_address,
    fabric_address}``. Returns ``{key_set, anonymous, bind, port, tls}`` as given and what clients use: ``scheme``
    (https when the frontend has a certificate), ``url`` (``scheme://host:port``; host: proxy_client_host, else the
    floating address, else a bind address that names one host, else the first proxy's fabric address; "" when none is
    known) and ``ca`` (proxy_tls_ca, the CA file on the control machine the clients verify with; "" for the system's
    trust store, and always without TLS). None (no gb10_proxy group) stays None.
    """
    if api is None:
        return None
    view = {key: api[key] for key in ("key_set", "anonymous", "bind", "port", "tls") if key in api}
    tls = bool(api.get("tls"))
    scheme = "https" if tls else "http"
    bind = str(api.get("bind") or "*").strip()
    host = str(api.get("client_host") or api.get("vip_address") or "").strip()
    if not host and bind not in WILDCARD_BINDS:
        host = bind
    host = host or str(api.get("fabric_address") or "").strip()
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address in a URL
    view["tls"] = tls
    view["scheme"] = scheme
    view["url"] = f"{scheme}://{host}:{api.get('port') or 8080}" if host else ""
    view["ca"] = str(api.get("ca") or "") if tls else ""
    if api.get("affinity") is not None:
        view["affinity"] = dict(api["affinity"])
    return view


def container_env(env):
    """The whole environment of a node's engine containers (what roles/serving's engine.env holds and the rolling
    upgrade's drift check compares): HF_MODULES_CACHE first (a profile's env may move it), then ``env`` (the plan's
    derived values and the profile's env), then the cache paths the containers mount, which nothing overrides."""
    return {
        "HF_MODULES_CACHE": CONTAINER_HF_MODULES,
        **env,
        "FLASHINFER_WORKSPACE_BASE": CONTAINER_FLASHINFER_WORKSPACE,
        "VLLM_CACHE_ROOT": CONTAINER_VLLM_CACHE,
    }


def snapshot_dir(repo_id, revision):
    """``hub/models--<org>--<name>/snapshots/<revision>``: where huggingface_hub puts a pinned snapshot."""
    return "hub/models--{}/snapshots/{}".format(repo_id.replace("/", "--"), revision)


def _positive_int(value):
    return None if isinstance(value, bool) or not isinstance(value, int) or value < 1 else value


def _per_node_setting(profile, host, key, default):
    value = ((profile.get("nodes") or {}).get(host) or {}).get(key)
    if value is None:
        value = (profile.get("defaults") or {}).get(key, default)
    return value


class Context:
    """What the rules read. ``profile`` is None until the profile stage passed."""

    def __init__(
        self,
        profile_name,
        profiles,
        nodes,
        fabric_cidr=None,
        ray_head=None,
        ray_workers=(),
        catalog_dir=None,
        api=None,
        site=None,
        image_catalog_dir=None,
    ):
        self.profile_name = profile_name
        # Who may reach what (exposure.py): the proxy and monitoring hosts, every host's address, the collection's
        # ports and the site's openings; None when not known (no fence is planned then).
        self.site = site
        self.exposure = None
        # The proxy's public frontend (issue 18) and how clients reach it: {key_set, anonymous, bind, port, tls, scheme,
        # url, ca} (client_api); None when not known.
        self.api = client_api(api)
        # Each proxy node's frontend as its own variables set it (``{host: {key_set, key_shape, anonymous, bind,
        # port}}``, never the key: rules_api.py judges each); None where the caller gave only the first proxy's.
        self.frontends = (api or {}).get("frontends")
        self.profiles = profiles or {}
        self.nodes = nodes or {}
        self.fabric_cidr = fabric_cidr
        self.ray_head = ray_head
        self.ray_workers = ray_workers
        self.catalog_dir = catalog_dir
        # Where the control machine keeps the catalogs the serving-image gate built from an image's own parser (a
        # release the collection has none of; roles/serving_image): searched after the collection's.
        self.image_catalog_dir = image_catalog_dir
        self.profile = None
        self.not_numbers = []

    def number(self, value, default, field, node=ALL_NODES, cast=float):
        """``value`` as a number (``default`` when unset); a figure that is not one is kept for not_a_number."""
        if value is None or value == "":
            return default
        try:
            if isinstance(value, bool):
                raise ValueError(value)
            number = cast(value)
        except (TypeError, ValueError):
            self.not_numbers.append(violation(node, "not_a_number", value, f"{field} must be a number, got {value!r}"))
            return default
        if number < 0:
            self.not_numbers.append(
                violation(node, "not_a_number", value, f"{field} must not be negative, got {value!r}")
            )
            return default
        return number

    @property
    def tensor_parallel(self):
        return self.topology == "tensor_parallel"


def derive(ctx):
    """Fill ``ctx`` from the chosen profile: every value a rule or the result needs, in one pass."""
    profile = ctx.profile = copy.deepcopy(ctx.profiles[ctx.profile_name]) or {}
    ctx.model = profile.get("model") or {}
    ctx.image = profile.get("image") or {}
    ctx.options = profile.get("vllm_options") or {}
    ctx.topology = profile.get("topology")
    ctx.ref = str(ctx.image.get("ref") or "")
    ctx.vllm_version = str(ctx.image.get("vllm_version") or "")
    ctx.catalog, ctx.catalog_error, ctx.catalog_pending = None, None, None
    ctx.catalog_dirs = [ctx.catalog_dir or _vllm_catalog.CATALOG_DIR] + (
        [ctx.image_catalog_dir] if ctx.image_catalog_dir else []
    )
    ctx.catalog_source = {"version": ctx.vllm_version, "source": None, "path": None}
    problem = _vllm_catalog.release_problem(ctx.vllm_version)
    try:
        if problem:
            raise _vllm_catalog.CatalogError(problem)
        ctx.catalog, found = _vllm_catalog.load_first(ctx.vllm_version, ctx.catalog_dirs)
        ctx.catalog_source.update(
            source="collection" if found == ctx.catalog_dirs[0] else _vllm_catalog.IMAGE_SOURCE,
            path=_vllm_catalog.catalog_path(ctx.vllm_version, found),
            generated_from=ctx.catalog.get("generated_from"),
        )
    except _vllm_catalog.CatalogMissing as exc:
        # a release the collection has no catalog of: the serving-image gate builds it from the image's own parser
        # on the node and plans again before any unit changes (roles/serving_image); until then nothing checks
        # vllm_options, and the roles that start vLLM refuse a plan in this state
        ctx.catalog_pending = exc
        ctx.catalog_source.update(source="pending", reason=str(exc))
    except _vllm_catalog.CatalogError as exc:
        ctx.catalog_error = exc
    ctx.repo_id = str(ctx.model.get("repo_id") or "")
    ctx.revision = str(ctx.model.get("revision") or "")
    ctx.served_name = ctx.model.get("served_model_name")
    _derive_group(ctx)
    _derive_profile_values(ctx)
    # In tensor-parallel the launcher decides the executor backend (tp_executor_backend refuses a disagreeing one).
    options = ctx.options
    if ctx.tensor_parallel:
        options = {k: v for k, v in options.items() if k != "distributed-executor-backend"}
    ctx.option_argv, ctx.option_findings = (
        _argv.options(options, ctx.catalog, ctx.catalog_dirs) if ctx.catalog else ([], [])
    )
    ctx.entries = {}
    ctx.per_node = {}
    for host in ctx.hosts:
        _derive_node(ctx, host)
    _derive_tp_group(ctx)
    for host in ctx.hosts:
        # every role runs vllm serve but a Ray worker, which the head's engine drives through Ray
        if ctx.per_node[host]["role"] != "ray_worker":
            ctx.entries[host]["argv"] = _argv.serve_argv(ctx, host)
    if ctx.site is not None:
        serving = {host: entry["port"] for host, entry in ctx.entries.items() if entry["serves"]}
        ctx.exposure = _exposure.node_exposure(ctx.site, sorted(ctx.nodes), serving, fabric_fence(ctx))
    return ctx


def _derive_group(ctx):
    """The hosts to plan: every node for replicas, head + workers (those in gb10_nodes) for tensor-parallel."""
    nodes = ctx.nodes
    ctx.hosts, ctx.head, ctx.workers, ctx.stray_workers = sorted(nodes), None, [], []
    given = ctx.profile.get("launcher")
    ctx.launcher = given if given is not None else DEFAULT_LAUNCHER
    ctx.launcher_given = given
    if ctx.topology == "tensor_parallel":
        given = sorted(w for w in (ctx.ray_workers or ()) if w != ctx.ray_head)
        ctx.head = ctx.ray_head if ctx.ray_head and ctx.ray_head in nodes else None
        ctx.stray_workers = [w for w in given if w not in nodes]
        ctx.workers = [w for w in given if w in nodes]
        ctx.hosts = ([ctx.head] if ctx.head else []) + ctx.workers
    ctx.tp_size = len(ctx.hosts) if ctx.tensor_parallel else 1


def _derive_profile_values(ctx):
    profile, model = ctx.profile, ctx.model
    spec = ctx.spec = profile.get("speculative") or {}
    ctx.spec_enabled = bool(spec and spec.get("enabled", True))
    ctx.spec_config, ctx.drafter_gib = None, 0.0
    if ctx.spec_enabled:
        tokens = spec.get("num_tokens")
        if spec.get("method") and _positive_int(tokens):
            ctx.spec_config = {"method": spec["method"], "num_speculative_tokens": tokens}
            if spec.get("model"):
                ctx.spec_config["model"] = spec["model"]
        ctx.drafter_gib = ctx.number(spec.get("drafter_gib"), 0.0, "speculative.drafter_gib")
    ctx.context_length = _positive_int(profile.get("context_length"))
    # config.json facts vLLM checks at start (the plan cannot read the snapshot: the profile states them)
    ctx.max_positions = _positive_int(model.get("max_position_embeddings"))
    layers = model.get("mtp_layers")
    ctx.mtp_layers = layers if isinstance(layers, int) and not isinstance(layers, bool) and layers >= 0 else None
    allow = str((profile.get("env") or {}).get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "")).strip().lower()
    ctx.allow_long_context = allow in ("1", "true")  # vllm/envs.py reads it so
    ctx.max_jobs = _positive_int(profile.get("max_jobs"))
    memory_cfg = profile.get("memory") or {}
    ctx.margin = ctx.number(memory_cfg.get("margin_gib"), 5.0, "memory.margin_gib")
    ctx.activation = ctx.number(memory_cfg.get("activation_reserve_gib"), 0.0, "memory.activation_reserve_gib")
    given = memory_cfg.get("shm_size", DEFAULT_SHM_SIZE)
    ctx.shm_size = str(given) if isinstance(given, (str, int)) and not isinstance(given, bool) else None
    ctx.shm_size_given = given
    ctx.shm_mib = _admission.parse_size_mib(ctx.shm_size) if ctx.shm_size and SHM_SIZE_RE.match(ctx.shm_size) else None
    ctx.checkpoint = ctx.number(model.get("checkpoint_gib"), 0.0, "model.checkpoint_gib")
    ctx.weights = ctx.checkpoint / ctx.tp_size
    kv_dtype = str(ctx.options.get("kv-cache-dtype", "auto"))
    ctx.attention = model.get("attention")
    ctx.attention_error = None
    try:
        ctx.token_bytes = _memory.kv_bytes_per_token(ctx.attention, 1 if kv_dtype.startswith("fp8") else 2, ctx.tp_size)
    except (KeyError, TypeError, ValueError) as exc:
        ctx.token_bytes, ctx.attention_error = None, exc
    ctx.heads = _tp.heads_summary(ctx.attention, ctx.topology, ctx.tp_size)
    ctx.explicit_kv = ctx.options.get("kv-cache-memory-bytes")
    ctx.explicit_kv_bytes, ctx.explicit_kv_invalid = None, False
    if ctx.explicit_kv is not None:
        try:
            ctx.explicit_kv_bytes = _memory.parse_bytes(ctx.explicit_kv)
        except ValueError:
            ctx.explicit_kv_invalid = True
    ctx.cidr = None
    if ctx.tensor_parallel and ctx.fabric_cidr:
        with contextlib.suppress(ValueError):  # not a subnet: tp_fabric_cidr says so
            ctx.cidr = ipaddress.ip_network(str(ctx.fabric_cidr), strict=False)
    ctx.head_address = (ctx.nodes.get(ctx.head) or {}).get("fabric_address") if ctx.head else None
    ctx.profile_env = {str(k): str(v) for k, v in (profile.get("env") or {}).items()}
    ctx.port = ctx.number(profile.get("port"), DEFAULT_PORT, "port", cast=int)
    ctx.bind_all_interfaces = profile.get("bind_all_interfaces") is True
    ctx.group_share, ctx.share_set_by = _tp.group_setting(profile, ctx.head, "gpu_memory_utilization")
    ctx.ray_auth, ctx.ray_firewall, ctx.ray_ports, ctx.ray_problems = _ray.settings(profile)
    ctx.mp_firewall, ctx.mp_master_port, ctx.mp_ephemeral, ctx.mp_problems = _mp.settings(profile)


def uses_ray(ctx):
    """Whether this plan runs a Ray cluster (tensor-parallel with launcher ray)."""
    return ctx.tensor_parallel and ctx.launcher == "ray"


def uses_mp(ctx):
    """Whether this plan runs vLLM's own multi-node launch (tensor-parallel with launcher mp, the default)."""
    return ctx.tensor_parallel and ctx.launcher != "ray"


def _derive_node(ctx, host):
    profile, node = ctx.profile, ctx.nodes[host] or {}
    facts = node.get("facts") or {}
    missing = [k for k in ("mem_total_mib", "mem_available_mib", "cores", "interfaces") if facts.get(k) in (None, "")]
    if ctx.tensor_parallel:
        head_role, rank_role = TP_ROLES["ray" if uses_ray(ctx) else "mp"]
        role = head_role if host == ctx.head else rank_role
        share = ctx.group_share
    else:
        role = "replica"
        share = _per_node_setting(profile, host, "gpu_memory_utilization", None)
    max_seqs = _per_node_setting(profile, host, "max_num_seqs", None)
    # the units this node's role writes and starts, their Conflicts= and watchdogs (units.py); a role serves the API
    # where it has an engine unit (units.py states which, once)
    units = _units.node_units(role)
    serves = units["engine_unit"] is not None
    entry = {"role": role, "argv": [], "env": {}, "ray_start": [], "memory": {}, "facts_source": {}}
    # what the serving units, the proxy and the watchdogs read instead of parsing argv (None: no vLLM here)
    entry["port"] = ctx.port if serves else None
    entry["serves"] = serves
    # this node's rank in the tensor-parallel group (the head 0, the workers in order), None in replicas
    entry["rank"] = ctx.hosts.index(host) if ctx.tensor_parallel else None
    parser = (profile.get("vllm_options") or {}).get("tool-call-parser") if serves else None
    entry["tool_call_parser"] = parser if isinstance(parser, str) else None
    entry["max_num_seqs"] = (
        max_seqs if serves and isinstance(max_seqs, int) and not isinstance(max_seqs, bool) else None
    )
    entry.update(units)
    # the engine container's private /dev/shm (--shm-size), None where it has none (the Ray launcher: host IPC)
    private_shm = role in PRIVATE_SHM_ROLES
    entry["shm_size"] = ctx.shm_size if private_shm and ctx.shm_mib is not None else None
    shm_gib = (ctx.shm_mib or 0.0) / _memory.MIB_PER_GIB if private_shm else 0.0
    entry["facts_source"] = dict(node.get("facts_source") or {})
    entry["facts_measured"] = dict(node.get("facts_measured") or {})
    ctx.entries[host] = entry

    cache = str(node.get("hf_cache_dir") or DEFAULT_HF_CACHE).rstrip("/")
    computed = f"{cache}/{snapshot_dir(ctx.repo_id, ctx.revision)}"
    given = str(node.get("snapshot_path")).rstrip("/") if node.get("snapshot_path") else None
    snapshot_problem = None
    host_snapshot = computed
    if given:
        if not given.startswith("/"):
            snapshot_problem = "not_local"
        elif not given.startswith(cache + "/"):
            snapshot_problem = "outside_cache"
        else:
            host_snapshot = given
    container_snapshot = CONTAINER_HF_CACHE + host_snapshot[len(cache) :]
    entry["snapshot_path"] = host_snapshot
    entry["container_snapshot_path"] = container_snapshot

    # environment: derived first, the profile's env on top (and then checked like everything else)
    env = {}
    if ctx.max_jobs is not None:
        env["MAX_JOBS"] = str(ctx.max_jobs)
    address = node.get("fabric_address")
    ifname = node.get("fabric_interface")
    if ctx.tensor_parallel:
        env.update(
            {
                "VLLM_HOST_IP": str(address),
                "NCCL_SOCKET_IFNAME": str(ifname),
                "GLOO_SOCKET_IFNAME": str(ifname),
            }
        )
    else:
        # A replica is a world of one, yet vLLM's worker makes its torch.distributed gloo groups all the same, and gloo
        # binds each group's listener to the address the host name resolves to: a node whose name resolves to its LAN
        # address then listens on 15 ephemeral ports a replica that no fence names (measured: vLLM 0.32.0, the
        # VLLM::Worker process; vLLM's security guide, "Notes on PyTorch Distributed"). Loopback is all it needs.
        env["GLOO_SOCKET_IFNAME"] = "lo"
    if uses_ray(ctx):
        env.update(
            {
                "RAY_memory_monitor_refresh_ms": "0",
                # Ray reads the mode from the environment only; the token is in the serving role's ray.env.
                "RAY_AUTH_MODE": ctx.ray_auth,
            }
        )
    env.update(ctx.profile_env)
    # a secret in the profile's env is refused (env_secret) and never printed with the plan
    entry["env"] = {k: ("(secret: refused)" if secret_env_name(k) else v) for k, v in sorted(env.items())}
    # the whole container environment, the cache paths included: engine.env as is, and what the drift check compares
    entry["container_env"] = container_env(entry["env"])
    if uses_ray(ctx):
        entry["ray_start"] = _argv.ray_start(role, address, ctx.head_address, ctx.ray_ports)

    share_ok = not isinstance(share, bool) and isinstance(share, (int, float)) and 0 < share <= 0.98
    memory = None
    if not missing and share_ok:
        total = ctx.number(facts["mem_total_mib"], 0.0, f"mem_total_mib of {host}", host) / _memory.MIB_PER_GIB
        available = ctx.number(facts["mem_available_mib"], 0.0, f"mem_available_mib of {host}", host)
        available /= _memory.MIB_PER_GIB
        reserve = ctx.number(
            node.get("other_work_reserve_gib"), 0.0, f"memory_guard_other_work_reserve_gib of {host}", host
        )
        table = _memory.node_table(
            mem_total_gib=total,
            mem_available_gib=available,
            gpu_memory_utilization=float(share),
            weights_gib=ctx.weights,
            drafter_gib=ctx.drafter_gib,
            activation_reserve_gib=ctx.activation,
            other_work_reserve_gib=reserve,
            kv_cache_bytes=ctx.explicit_kv_bytes,
            kv_token_bytes=ctx.token_bytes,
            context_length=ctx.context_length,
            shm_gib=shm_gib,
            margin_gib=ctx.margin,
        )
        table["margin_gib"] = ctx.margin
        entry["memory"] = table
        memory = {"table": table, "total": total, "available": available, "reserve": reserve, "shm": shm_gib}
    ctx.per_node[host] = {
        "node": node,
        "facts": facts,
        "missing": missing,
        "role": role,
        "serves": serves,
        "share": share,
        "share_ok": share_ok,
        "max_seqs": max_seqs,
        "env": env,
        "address": address,
        "ifname": ifname,
        "cache": cache,
        "computed_snapshot": computed,
        "given_snapshot": given,
        "snapshot_problem": snapshot_problem,
        "memory": memory,
    }


def ray_fence(ctx):
    """What fences Ray in tensor-parallel (None in replicas): the auth mode, whether the firewall is wanted, the
    fixed ports, the peers (the group's fabric addresses), the head's GCS address and each node's listening ports,
    for the serving and fabric_firewall roles."""
    if not uses_ray(ctx):
        return None
    peers = _peers(ctx)
    return {
        "auth": ctx.ray_auth,
        "firewall": ctx.ray_firewall,
        "ports": dict(ctx.ray_ports),
        "worker_ports": [ctx.ray_ports["min_worker"], ctx.ray_ports["max_worker"]],
        "peers": peers,
        # where a driver reaches the head's GCS: the watchdogs read the cluster's alive nodes there
        "gcs_address": f"{ctx.head_address}:{ctx.ray_ports['gcs']}" if ctx.head_address else None,
        "listen": {h: _ray.listening_ports(ctx.ray_ports, ctx.per_node[h]["role"]) for h in ctx.hosts},
    }


def _peers(ctx):
    return sorted({str(ctx.per_node[h]["address"]) for h in ctx.hosts if ctx.per_node[h]["address"]})


def mp_launch(ctx):
    """vLLM's own multi-node launch (None unless launcher mp): the master address and port every rank's argv names,
    and the kernel's ephemeral range where the group's other sockets bind (``mp.py``)."""
    if not uses_mp(ctx):
        return None
    return {
        "head": ctx.head,
        "master_address": str(ctx.head_address) if ctx.head_address else None,
        "master_port": ctx.mp_master_port,
        # where a headless rank's watchdog asks whether its head serves (the head's vLLM, on its fabric address)
        "head_health_url": f"http://{ctx.head_address}:{ctx.port}/health" if ctx.head_address else None,
        "ephemeral_ports": list(ctx.mp_ephemeral),
        "firewall": ctx.mp_firewall,
    }


def fabric_fence(ctx):
    """What roles/fabric_firewall renders on each rank of a tensor-parallel group (None in replicas): whether the
    profile wants it, the peers (the group's fabric addresses), the single ports and port ranges only the peers may
    reach, per node, and where they come from. Ray's ports for launcher ray (``ray.py``); the master port and the
    ephemeral range for launcher mp (``mp.py``)."""
    if not ctx.tensor_parallel:
        return None
    if uses_ray(ctx):
        ports = ctx.ray_ports
        ranges = [[ports["min_worker"], ports["max_worker"]]]
        listen = {h: _ray.listening_ports(ports, ctx.per_node[h]["role"]) for h in ctx.hosts}
        firewall, what = ctx.ray_firewall, "ray"
    else:
        ranges = [list(ctx.mp_ephemeral)]
        listen = {h: [ctx.mp_master_port] if h == ctx.head else [] for h in ctx.hosts}
        firewall, what = ctx.mp_firewall, "mp"
    return {"launcher": what, "firewall": firewall, "peers": _peers(ctx), "listen": listen, "ranges": ranges}


def judged(ctx):
    """``{host: memory figures}`` of the hosts whose memory the plan could judge (in plan order)."""
    return {host: ctx.per_node[host]["memory"] for host in ctx.hosts if ctx.per_node[host]["memory"]}


def _derive_tp_group(ctx):
    """Tensor-parallel: the group's one share and its memory summary, judged once every rank has its table."""
    ctx.group, ctx.group_limits = None, None
    if not ctx.tensor_parallel:
        return
    figures = judged(ctx)
    limits = {
        host: _memory.max_share(f["available"], f["reserve"] + f["shm"], ctx.margin, f["total"])
        for host, f in figures.items()
    }
    summary = _tp.group_memory(
        {h: f["table"] for h, f in figures.items()}, ctx.group_share, ctx.share_set_by, ctx.context_length
    )
    summary["heads"] = ctx.heads
    ctx.group = summary
    ctx.group_limits = {
        "set_by": ctx.share_set_by,
        "max_share": _tp.group_max_share(limits),
        "kv_rank": (summary["kv_tokens_ranks"] or [None])[0],
    }
