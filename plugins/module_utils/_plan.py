# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The serving plan: one pure function that every field-report pitfall goes through.

``plan(profile_name, profiles, nodes, ...)`` turns a named serving profile and per-node facts into what every
node runs (vLLM argv, container environment, Ray start command), the memory arithmetic of every node, and
the list of ALL violations found, each ``{"node", "rule", "value", "message"}`` with the numbers and the fix.
Nothing is raised for a bad profile: the operator sees every problem at once, before any node is touched.
No Ansible import here; ``plugins/action/serving_plan.py`` is the Ansible face.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re

from . import _memory, _plan_tp, _vllm_catalog

TOPOLOGIES = ("replicas", "tensor_parallel")
CONTAINER_HF_CACHE = "/root/.cache/huggingface"
DEFAULT_HF_CACHE = "/var/lib/gb10/hf-cache"
DEFAULT_PORT = 8000
RAY_PORT = 6379
ALL_NODES = "all"

_DIGEST_REF_RE = re.compile(r"^(?P<repo>[a-z0-9]+(?:[._:/-][a-z0-9]+)*)@sha256:(?P<digest>[0-9a-f]{64})$")
_REVISION_RE = re.compile(r"^[0-9a-f]{40}$")
_REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")
_OPTION_KEY_RE = re.compile(r"^[a-z0-9][a-z0-9.-]*$")

# Options the plan writes itself from the profile's structured fields or per-node overrides; giving them in
# vllm_options too would make two sources of truth (and a per-node value global).
_PLAN_OWNED = {
    "model": "the plan passes the local snapshot path as the positional model argument",
    "served-model-name": "set model.served_model_name",
    "max-model-len": "set context_length",
    "gpu-memory-utilization": "set nodes.<host>.gpu_memory_utilization (or defaults.gpu_memory_utilization)",
    "max-num-seqs": "set nodes.<host>.max_num_seqs (or defaults.max_num_seqs)",
    "tensor-parallel-size": "the plan derives it from the tensor-parallel group (gb10_ray_head + gb10_ray_workers)",
    "speculative-config": "set speculative.method / speculative.num_tokens / speculative.drafter_gib",
    "host": "the server listens on the node's address; set port: for the port",
    "port": "set port:",
}

# JSON-valued options whose value the plan also checks for shape, not only for syntax.
_MODALITIES = ("image", "video", "audio")


def _violation(node, rule, value, message):
    return {"node": node, "rule": rule, "value": value, "message": message}


def _number(value, default, field, node, violations, cast=float):
    """``value`` as a number (``default`` when unset); a violation naming ``field`` when it is not one."""
    if value is None or value == "":
        return default
    try:
        if isinstance(value, bool):
            raise ValueError(value)
        number = cast(value)
    except (TypeError, ValueError):
        violations.append(_violation(node, "not_a_number", value, f"{field} must be a number, got {value!r}"))
        return default
    if number < 0:
        violations.append(_violation(node, "not_a_number", value, f"{field} must not be negative, got {value!r}"))
        return default
    return number


def _fmt(value):
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def snapshot_dir(repo_id, revision):
    """``hub/models--<org>--<name>/snapshots/<revision>``: where huggingface_hub puts a pinned snapshot."""
    return "hub/models--{}/snapshots/{}".format(repo_id.replace("/", "--"), revision)


def _option_argv(name, value, spec):
    """argv words for one option from its profile value (dicts as compact JSON with sorted keys)."""
    flag = "--" + name
    if value is True:
        return [flag]
    if value is False:
        return ["--no-" + name]
    if isinstance(value, dict):
        return [flag, json.dumps(value, sort_keys=True, separators=(",", ":"))]
    if isinstance(value, (list, tuple)):
        if spec and spec.get("json"):
            return [flag, json.dumps(value, separators=(",", ":"))]
        return [flag] + [str(v) for v in value]
    return [flag, str(value)]


def _check_json_shape(name, parsed):
    """Shape errors of a JSON-valued option whose meaning the plan knows; '' when it is fine."""
    if name == "limit-mm-per-prompt":
        if not isinstance(parsed, dict):
            return 'must be a JSON object of modality limits, e.g. {"image":0,"video":0}'
        for key, limit in parsed.items():
            count = limit.get("count") if isinstance(limit, dict) else limit
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                return f"limit for {key!r} must be a non-negative integer, got {limit!r}"
    elif name == "speculative-config":
        if not isinstance(parsed, dict):
            return "must be a JSON object"
        tokens = parsed.get("num_speculative_tokens")
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            return f"num_speculative_tokens must be a positive integer, got {tokens!r}"
    elif name.endswith("-config") and not isinstance(parsed, dict):
        return f"must be a JSON object, got {type(parsed).__name__}"
    return ""


def _options_argv(profile, catalog, violations):
    """Validate ``vllm_options`` against the catalog and turn them into argv words (sorted: no churn)."""
    options = profile.get("vllm_options") or {}
    argv = []
    version = catalog["vllm_version"]
    for key in sorted(options, key=str):
        value = options[key]
        name = str(key)
        if name.startswith("-"):
            violations.append(
                _violation(
                    ALL_NODES,
                    "vllm_option_name",
                    name,
                    "vllm_options key {!r} starts with a dash; write the option name without dashes: {!r}".format(
                        name, name.lstrip("-")
                    ),
                )
            )
            name = name.lstrip("-")
        if name in _PLAN_OWNED:
            violations.append(
                _violation(
                    ALL_NODES,
                    "vllm_option_owned_by_plan",
                    f"--{name}",
                    f"--{name} is written by the plan, not by vllm_options: remove it; {_PLAN_OWNED[name]}",
                )
            )
            continue
        if value is None:
            continue
        flag = "--no-" + name if value is False else "--" + name
        status, detail = _vllm_catalog.lookup(catalog, flag)
        if status == "abbreviation":
            violations.append(
                _violation(
                    ALL_NODES,
                    "vllm_flag_abbreviated",
                    flag,
                    f"{flag} is not an option of vLLM {version}, only a prefix of {' / '.join(detail)}: vLLM's "
                    "argparse expands it silently and breaks the day another option shares the prefix. Write the "
                    "full option name in vllm_options",
                )
            )
            continue
        if status == "unknown":
            hint = ("; did you mean {}?".format(" or ".join(detail))) if detail else ""
            violations.append(
                _violation(
                    ALL_NODES,
                    "vllm_flag_unknown",
                    flag,
                    f"{flag} is not an option of vLLM {version} (misspelled, removed, or from another release){hint} "
                    f"Remove it or use an option of image.vllm_version {version}.",
                )
            )
            continue
        spec = detail
        if spec.get("takes_value") and isinstance(value, bool):
            violations.append(
                _violation(
                    ALL_NODES,
                    "vllm_flag_needs_value",
                    flag,
                    f"{flag} takes a value in vLLM {version}, got {value!r}: give the value, not true/false",
                )
            )
            continue
        if not spec.get("takes_value") and not isinstance(value, bool):
            violations.append(
                _violation(
                    ALL_NODES,
                    "vllm_flag_takes_no_value",
                    flag,
                    f"{flag} is a switch in vLLM {version} and takes no value, got {value!r}: "
                    f"write true (or false for --no-{name})",
                )
            )
            continue
        if spec.get("json") and not isinstance(value, bool):
            if isinstance(value, str):
                try:
                    parsed = json.loads(value)
                except ValueError as exc:
                    violations.append(
                        _violation(
                            ALL_NODES,
                            "vllm_flag_json_invalid",
                            value,
                            f"--{name} needs valid JSON, {value!r} is not ({exc}): write it as a YAML mapping in "
                            "vllm_options and the plan serialises it",
                        )
                    )
                    continue
                value = parsed
            shape = _check_json_shape(name, value)
            if shape:
                violations.append(
                    _violation(
                        ALL_NODES,
                        "vllm_flag_json_shape",
                        json.dumps(value, sort_keys=True),
                        f"--{name} {shape}",
                    )
                )
                continue
        if spec.get("choices") and not isinstance(value, bool) and str(value) not in spec["choices"]:
            violations.append(
                _violation(
                    ALL_NODES,
                    "vllm_flag_choice",
                    value,
                    "--{} {!r} is not accepted by vLLM {}: use one of {}".format(
                        name, value, version, ", ".join(spec["choices"])
                    ),
                )
            )
            continue
        argv.extend(_option_argv(name, value, spec))
    return argv


def _limits(profile):
    value = (profile.get("vllm_options") or {}).get("limit-mm-per-prompt")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def _check_text_only(profile, violations):
    model = profile.get("model") or {}
    if not model.get("multimodal") or not model.get("text_only", False):
        return
    modalities = list(model.get("modalities") or ("image", "video"))
    limits = _limits(profile)
    if limits is None and (profile.get("vllm_options") or {}).get("limit-mm-per-prompt") is not None:
        return  # present but not a JSON object: reported once, by the flag rules
    limits = limits or {}
    wanted = json.dumps({m: 0 for m in modalities}, sort_keys=True, separators=(",", ":"))
    wrong = [m for m in modalities if limits.get(m) != 0]
    skip = bool((profile.get("vllm_options") or {}).get("skip-mm-profiling"))
    if wrong:
        violations.append(
            _violation(
                ALL_NODES,
                "text_only_mm_limits",
                json.dumps(limits, sort_keys=True) if limits else None,
                "model {} is multimodal and the profile is text-only, but --limit-mm-per-prompt leaves {} above 0{}: "
                "the API server then warms the vision processor after startup and can be OOM-killed. Set "
                "vllm_options.limit-mm-per-prompt to {} (every modality limit set to 0, not omitted)".format(
                    model.get("repo_id"),
                    ", ".join(wrong),
                    "; --skip-mm-profiling only skips the engine's profiling pass, it does not make the run text-only"
                    if skip
                    else "",
                    wanted,
                ),
            )
        )


def _check_tools(profile, violations):
    options = profile.get("vllm_options") or {}
    if options.get("enable-auto-tool-choice") and not options.get("tool-call-parser"):
        violations.append(
            _violation(
                ALL_NODES,
                "tool_choice_without_parser",
                "--enable-auto-tool-choice",
                "--enable-auto-tool-choice is set without --tool-call-parser: vLLM refuses to start (or tool calls "
                "come back as plain text). Set vllm_options.tool-call-parser to the model's parser",
            )
        )


def _resolve_facts(node):
    facts = node.get("facts") or {}
    missing = [k for k in ("mem_total_mib", "mem_available_mib", "cores", "interfaces") if facts.get(k) in (None, "")]
    return facts, missing


def _per_node_setting(profile, host, key, default):
    nodes = profile.get("nodes") or {}
    defaults = profile.get("defaults") or {}
    value = (nodes.get(host) or {}).get(key)
    if value is None:
        value = defaults.get(key, default)
    return value


def plan(profile_name, profiles, nodes, fabric_cidr=None, ray_head=None, ray_workers=(), catalog_dir=None):
    """Build the serving plan.

    profile_name: the operator's ``serving_profile``; profiles: the inventory's ``serving_profiles``.
    nodes: ``{host: {"fabric_interface", "fabric_address", "facts": {mem_total_mib, mem_available_mib, cores,
    interfaces: {ifname: "addr/prefix"}}, "facts_source": {...}, "other_work_reserve_gib", "snapshot_path",
    "hf_cache_dir"}}``; fabric_cidr: the fabric subnet; ray_head / ray_workers: the tensor-parallel group.
    In tensor-parallel, ``group`` holds what vLLM runs every rank at (``_plan_tp``): the one share, the smallest
    rank's KV tokens, the tightest headroom and the heads; a per-node value on a Ray worker is refused.
    """
    violations = []
    result = {
        "profile": profile_name,
        "topology": None,
        "image": None,
        "vllm_version": None,
        "model": None,
        "nodes": {},
        "group": None,
        "violations": violations,
    }
    profiles = profiles or {}
    if not profile_name:
        violations.append(
            _violation(
                ALL_NODES,
                "profile_missing",
                None,
                "no serving profile chosen: pass -e serving_profile=<name>; this inventory has: %s"
                % (", ".join(sorted(profiles)) or "none"),
            )
        )
        return result
    if profile_name not in profiles:
        violations.append(
            _violation(
                ALL_NODES,
                "profile_unknown",
                profile_name,
                "serving profile {!r} is not in this inventory's serving_profiles; choose one of: {}".format(
                    profile_name, ", ".join(sorted(profiles)) or "none"
                ),
            )
        )
        return result
    profile = copy.deepcopy(profiles[profile_name]) or {}
    model = profile.get("model") or {}
    image = profile.get("image") or {}
    topology = profile.get("topology")
    result.update(topology=topology, image=image.get("ref"), vllm_version=image.get("vllm_version"))

    # --- image: digest only -------------------------------------------------------------------------------
    ref = str(image.get("ref") or "")
    match = _DIGEST_REF_RE.match(ref)
    if not match or ":" in match.group("repo").rsplit("/", 1)[-1]:
        violations.append(
            _violation(
                ALL_NODES,
                "image_not_digest",
                ref or None,
                f"image.ref {ref!r} is not pinned by digest: a tag can move under you. Write it as "
                "<repository>@sha256:<64 hex> without a tag (docker buildx imagetools inspect <ref> prints the digest)",
            )
        )

    # --- the flag catalog of the image's vLLM release -------------------------------------------------------
    catalog = None
    version = str(image.get("vllm_version") or "")
    try:
        catalog = _vllm_catalog.load(version, catalog_dir or _vllm_catalog.CATALOG_DIR)
    except _vllm_catalog.CatalogError as exc:
        violations.append(_violation(ALL_NODES, "vllm_catalog_missing", version or None, f"image.vllm_version: {exc}"))

    # --- model ------------------------------------------------------------------------------------------------
    repo_id = str(model.get("repo_id") or "")
    revision = str(model.get("revision") or "")
    if not _REPO_ID_RE.match(repo_id):
        violations.append(
            _violation(
                ALL_NODES, "model_repo_id", repo_id or None, f"model.repo_id must be <org>/<name>, got {repo_id!r}"
            )
        )
    if not _REVISION_RE.match(revision):
        violations.append(
            _violation(
                ALL_NODES,
                "model_revision_not_pinned",
                revision or None,
                f"model.revision {revision!r} is not a commit: pin the 40-hex commit id "
                "(a branch such as 'main' moves)",
            )
        )
    served_name = model.get("served_model_name")
    if not served_name:
        violations.append(
            _violation(
                ALL_NODES,
                "served_model_name_missing",
                None,
                "model.served_model_name is not set: the server is started on a local snapshot path, so without "
                "--served-model-name clients would have to ask for that path. Set it (e.g. %r)"
                % (repo_id.rsplit("/", 1)[-1] or "my-model"),
            )
        )
    result["model"] = {"repo_id": repo_id, "revision": revision, "served_model_name": served_name}

    # --- topology and groups ----------------------------------------------------------------------------------
    hosts = sorted(nodes)
    head, workers = None, []
    if topology not in TOPOLOGIES:
        violations.append(
            _violation(
                ALL_NODES,
                "topology_unknown",
                topology,
                "topology {!r} is not one of {}".format(topology, ", ".join(TOPOLOGIES)),
            )
        )
    elif topology == "tensor_parallel":
        head = ray_head
        workers = sorted(w for w in (ray_workers or ()) if w != head)
        if not head or head not in nodes:
            violations.append(
                _violation(
                    ALL_NODES,
                    "tp_group",
                    head,
                    f"tensor_parallel needs exactly one host in gb10_ray_head that is also in gb10_nodes; got {head!r}",
                )
            )
            head = None
        stray = [w for w in workers if w not in nodes]
        if stray or not workers:
            violations.append(
                _violation(
                    ALL_NODES,
                    "tp_group",
                    ", ".join(stray) or None,
                    "tensor_parallel needs at least one gb10_ray_workers host, each also in gb10_nodes; %s"
                    % ("not in gb10_nodes: " + ", ".join(stray) if stray else "gb10_ray_workers is empty"),
                )
            )
            workers = [w for w in workers if w in nodes]
        hosts = ([head] if head else []) + workers
    if not hosts:
        violations.append(_violation(ALL_NODES, "no_nodes", None, "group gb10_nodes has no hosts: nothing to plan"))
    tp_size = len(hosts) if topology == "tensor_parallel" else 1
    result["tensor_parallel_size"] = tp_size

    # --- speculative decoding ---------------------------------------------------------------------------------
    spec = profile.get("speculative") or {}
    drafter_gib = 0.0
    spec_config = None
    if spec and spec.get("enabled", True):
        tokens = spec.get("num_tokens")
        if not spec.get("method") or isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            violations.append(
                _violation(
                    ALL_NODES,
                    "speculative_config",
                    json.dumps(spec, sort_keys=True),
                    "speculative needs method (e.g. mtp) and num_tokens >= 1, got method={!r} num_tokens={!r}".format(
                        spec.get("method"), tokens
                    ),
                )
            )
        else:
            spec_config = {"method": spec["method"], "num_speculative_tokens": tokens}
            if spec.get("model"):
                spec_config["model"] = spec["model"]
        if spec.get("drafter_gib") is None:
            violations.append(
                _violation(
                    ALL_NODES,
                    "speculative_drafter_size",
                    None,
                    "speculative.drafter_gib is not set: the drafter's weights come out of the KV budget; state "
                    "its size in GiB (0 only when it shares the model's weights)",
                )
            )
        drafter_gib = _number(spec.get("drafter_gib"), 0.0, "speculative.drafter_gib", ALL_NODES, violations)

    # --- profile-wide argv ------------------------------------------------------------------------------------
    option_argv = _options_argv(profile, catalog, violations) if catalog else []
    _check_text_only(profile, violations)
    _check_tools(profile, violations)
    if catalog:
        _check_pinned_flags(catalog, topology, spec_config, violations)

    context_length = profile.get("context_length")
    if isinstance(context_length, bool) or not isinstance(context_length, int) or context_length < 1:
        violations.append(
            _violation(
                ALL_NODES,
                "context_length",
                context_length,
                f"context_length must be a positive integer (it becomes --max-model-len), got {context_length!r}",
            )
        )
        context_length = None

    max_jobs = profile.get("max_jobs")
    if isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 1:
        violations.append(
            _violation(
                ALL_NODES,
                "max_jobs_missing",
                max_jobs,
                f"max_jobs is {max_jobs!r}: MAX_JOBS defaults to the CPU count and the FlashInfer JIT then runs "
                "that many ~1.2-5 GiB compiler processes on top of the resident weights. Set max_jobs (2 while a model "
                "is resident) and the plan forwards MAX_JOBS to every container",
            )
        )
        max_jobs = None

    memory_cfg = profile.get("memory") or {}
    margin = _number(memory_cfg.get("margin_gib"), 5.0, "memory.margin_gib", ALL_NODES, violations)
    activation = _number(
        memory_cfg.get("activation_reserve_gib"), 0.0, "memory.activation_reserve_gib", ALL_NODES, violations
    )
    checkpoint = _number(model.get("checkpoint_gib"), 0.0, "model.checkpoint_gib", ALL_NODES, violations)
    if checkpoint <= 0:
        violations.append(
            _violation(
                ALL_NODES,
                "model_checkpoint_size",
                model.get("checkpoint_gib"),
                "model.checkpoint_gib must state the checkpoint's size in GiB (it decides the memory budget)",
            )
        )
    weights = checkpoint / tp_size
    kv_dtype = str((profile.get("vllm_options") or {}).get("kv-cache-dtype", "auto"))
    kv_dtype_bytes = 1 if kv_dtype.startswith("fp8") else 2
    try:
        token_bytes = _memory.kv_bytes_per_token(model.get("attention"), kv_dtype_bytes, tp_size)
    except (KeyError, TypeError, ValueError) as exc:
        token_bytes = None
        violations.append(
            _violation(
                ALL_NODES,
                "model_attention_shape",
                json.dumps(model.get("attention"), sort_keys=True),
                f"model.attention is incomplete ({exc}): give kv_bytes_per_token, or kind gqa with num_layers, "
                "num_kv_heads, head_dim, or kind mla with num_layers, kv_lora_rank, qk_rope_head_dim",
            )
        )
    shape_failed = any(v["rule"] == "model_attention_shape" for v in violations)
    heads = _check_heads(model.get("attention"), topology, tp_size, len(nodes), shape_failed, violations)
    explicit_kv = (profile.get("vllm_options") or {}).get("kv-cache-memory-bytes")
    explicit_kv_bytes = None
    if explicit_kv is not None:
        try:
            explicit_kv_bytes = _memory.parse_bytes(explicit_kv)
        except ValueError:
            violations.append(
                _violation(
                    ALL_NODES,
                    "kv_cache_memory_bytes",
                    explicit_kv,
                    f"--kv-cache-memory-bytes {explicit_kv!r} is not a size: write bytes or a vLLM size such as 6G",
                )
            )

    # --- per node ---------------------------------------------------------------------------------------------
    cidr = None
    if topology == "tensor_parallel":
        try:
            cidr = ipaddress.ip_network(str(fabric_cidr), strict=False) if fabric_cidr else None
        except ValueError:
            cidr = None
        if cidr is None:
            violations.append(
                _violation(
                    ALL_NODES,
                    "tp_fabric_cidr",
                    fabric_cidr,
                    f"gb10_fabric_cidr {fabric_cidr!r} is not a subnet: set it to the fabric network "
                    "(e.g. 192.168.200.0/24) so the plan can check every rank's address",
                )
            )
    head_address = (nodes.get(head) or {}).get("fabric_address") if head else None
    profile_env = {str(k): str(v) for k, v in (profile.get("env") or {}).items()}
    port = _number(profile.get("port"), DEFAULT_PORT, "port", ALL_NODES, violations, cast=int)
    known_overrides = set(profile.get("nodes") or {})
    for host in sorted(known_overrides - set(nodes)):
        violations.append(
            _violation(
                host,
                "node_override_unknown_host",
                host,
                "profile nodes: names {}, which is not in gb10_nodes ({}): fix the name or remove the entry".format(
                    host, ", ".join(sorted(nodes))
                ),
            )
        )

    # tensor-parallel: one share for the group, the one the head's argv carries (vLLM applies it to every rank)
    group_share, share_set_by = _plan_tp.group_setting(profile, head, "gpu_memory_utilization")
    judged = {}  # host -> (memory table, MemTotal, MemAvailable, other work reserve), all in GiB
    for host in hosts:
        node = nodes[host] or {}
        facts, missing = _resolve_facts(node)
        role = ("ray_head" if host == head else "ray_worker") if topology == "tensor_parallel" else "replica"
        if topology == "tensor_parallel":
            share = group_share
        else:
            share = _per_node_setting(profile, host, "gpu_memory_utilization", None)
        max_seqs = _per_node_setting(profile, host, "max_num_seqs", None)
        entry = {"role": role, "argv": [], "env": {}, "ray_start": [], "memory": {}, "facts_source": {}}
        # what the serving units, the proxy and the watchdogs read instead of parsing argv (None: no vLLM here)
        serves = role != "ray_worker"
        entry["port"] = port if serves else None
        entry["max_num_seqs"] = (
            max_seqs if serves and isinstance(max_seqs, int) and not isinstance(max_seqs, bool) else None
        )
        entry["facts_source"] = dict(node.get("facts_source") or {})
        entry["facts_measured"] = dict(node.get("facts_measured") or {})
        result["nodes"][host] = entry

        cache = str(node.get("hf_cache_dir") or DEFAULT_HF_CACHE).rstrip("/")
        host_snapshot = f"{cache}/{snapshot_dir(repo_id, revision)}"
        given = node.get("snapshot_path")
        if given:
            given = str(given).rstrip("/")
            if not given.startswith("/"):
                violations.append(
                    _violation(
                        host,
                        "model_not_local_path",
                        given,
                        f"model_weights_snapshot_path on {host} is {given!r}, not a local directory: the processor "
                        "opens files in the model path directly and fails on a repo id well into startup. Remove "
                        f"it (the plan computes {host_snapshot}) or give the snapshot's absolute path",
                    )
                )
            elif not given.startswith(cache + "/"):
                violations.append(
                    _violation(
                        host,
                        "model_snapshot_outside_cache",
                        given,
                        f"model_weights_snapshot_path on {host} is {given}, outside the HF cache {cache} that is "
                        f"mounted in the container at {CONTAINER_HF_CACHE}: put the snapshot under the cache "
                        f"(expected {host_snapshot})",
                    )
                )
            else:
                host_snapshot = given
        container_snapshot = CONTAINER_HF_CACHE + host_snapshot[len(cache) :]
        entry["snapshot_path"] = host_snapshot
        entry["container_snapshot_path"] = container_snapshot

        if missing:
            violations.append(
                _violation(
                    host,
                    "node_facts_missing",
                    ", ".join(missing),
                    "no {} for {}: state them in gb10_stated_facts or run with -e plan_gather_facts=true".format(
                        ", ".join(missing), host
                    ),
                )
            )

        # environment: derived first, the profile's env on top (and then checked like everything else)
        env = {}
        if max_jobs is not None:
            env["MAX_JOBS"] = str(max_jobs)
        address = node.get("fabric_address")
        ifname = node.get("fabric_interface")
        if topology == "tensor_parallel":
            env.update(
                {
                    "VLLM_HOST_IP": str(address),
                    "NCCL_SOCKET_IFNAME": str(ifname),
                    "GLOO_SOCKET_IFNAME": str(ifname),
                    "RAY_memory_monitor_refresh_ms": "0",
                }
            )
        env.update(profile_env)
        entry["env"] = dict(sorted(env.items()))
        if env.get("MAX_JOBS") is None or not str(env.get("MAX_JOBS")).isdigit() or int(env["MAX_JOBS"]) < 1:
            if max_jobs is not None:
                violations.append(
                    _violation(
                        host,
                        "max_jobs_not_forwarded",
                        env.get("MAX_JOBS"),
                        "MAX_JOBS in {}'s container environment is {!r} (the profile env overrides max_jobs={}): "
                        "remove MAX_JOBS from env".format(host, env.get("MAX_JOBS"), max_jobs),
                    )
                )
        elif facts.get("cores") and int(env["MAX_JOBS"]) > int(facts["cores"]):
            violations.append(
                _violation(
                    host,
                    "max_jobs_above_cores",
                    int(env["MAX_JOBS"]),
                    "MAX_JOBS={} on {} is above its {} cores: lower max_jobs to at most {}".format(
                        env["MAX_JOBS"], host, facts["cores"], facts["cores"]
                    ),
                )
            )

        if topology == "tensor_parallel":
            _check_tp_node(host, node, facts, env, cidr, violations)
            if role == "ray_head":
                entry["ray_start"] = [
                    "ray",
                    "start",
                    "--head",
                    f"--node-ip-address={address}",
                    f"--port={RAY_PORT}",
                    "--num-gpus=1",
                    # No dashboard: nothing here reads it, and on a loaded head it is the heaviest Ray process.
                    "--include-dashboard=false",
                    "--block",
                ]
            else:
                entry["ray_start"] = [
                    "ray",
                    "start",
                    f"--address={head_address}:{RAY_PORT}",
                    f"--node-ip-address={address}",
                    "--num-gpus=1",
                    "--block",
                ]

        # memory
        share_ok = not isinstance(share, bool) and isinstance(share, (int, float)) and 0 < share <= 0.98
        if not share_ok and topology == "tensor_parallel" and role == "ray_head":
            violations.append(
                _violation(
                    host,
                    "gpu_memory_utilization",
                    share,
                    f"the tensor-parallel group's gpu_memory_utilization ({share_set_by}) is {share!r}: set "
                    f"{share_set_by} to a share between 0 and 0.98, low enough for the tighter node (vLLM applies "
                    "the head's value to every rank)",
                )
            )
        elif not share_ok and topology != "tensor_parallel":
            violations.append(
                _violation(
                    host,
                    "gpu_memory_utilization",
                    share,
                    f"gpu_memory_utilization for {host} is {share!r}: set nodes.{host}.gpu_memory_utilization (or "
                    "defaults.gpu_memory_utilization) to a share between 0 and 0.98; a node that runs other work "
                    "gets less",
                )
            )
        if role != "ray_worker" and (isinstance(max_seqs, bool) or not isinstance(max_seqs, int) or max_seqs < 1):
            violations.append(
                _violation(
                    host,
                    "max_num_seqs",
                    max_seqs,
                    f"max_num_seqs for {host} is {max_seqs!r}: set nodes.{host}.max_num_seqs (or "
                    "defaults.max_num_seqs) to the replica's concurrency; the proxy queues the rest",
                )
            )
        if not missing and share_ok:
            total = _number(facts["mem_total_mib"], 0.0, f"mem_total_mib of {host}", host, violations)
            total /= _memory.MIB_PER_GIB
            available = _number(facts["mem_available_mib"], 0.0, f"mem_available_mib of {host}", host, violations)
            available /= _memory.MIB_PER_GIB
            reserve = _number(
                node.get("other_work_reserve_gib"),
                0.0,
                f"memory_guard_other_work_reserve_gib of {host}",
                host,
                violations,
            )
            table = _memory.node_table(
                mem_total_gib=total,
                mem_available_gib=available,
                gpu_memory_utilization=float(share),
                weights_gib=weights,
                drafter_gib=drafter_gib,
                activation_reserve_gib=activation,
                other_work_reserve_gib=reserve,
                kv_cache_bytes=explicit_kv_bytes,
                kv_token_bytes=token_bytes,
                context_length=context_length,
            )
            table["margin_gib"] = margin
            entry["memory"] = table
            judged[host] = (table, total, available, reserve)

        # argv: the vLLM process runs on every replica, and on the head only in tensor-parallel
        if role != "ray_worker":
            argv = ["vllm", "serve", container_snapshot]
            if served_name:
                argv += ["--served-model-name", str(served_name)]
            argv += ["--host", str(address or "0.0.0.0"), "--port", str(port)]
            if context_length:
                argv += ["--max-model-len", str(context_length)]
            if share_ok:
                argv += ["--gpu-memory-utilization", f"{share:g}"]
            if isinstance(max_seqs, int) and not isinstance(max_seqs, bool):
                argv += ["--max-num-seqs", str(max_seqs)]
            if topology == "tensor_parallel":
                argv += ["--tensor-parallel-size", str(tp_size)]
                if "distributed-executor-backend" not in (profile.get("vllm_options") or {}):
                    argv += ["--distributed-executor-backend", "ray"]
            if spec_config:
                argv += ["--speculative-config", json.dumps(spec_config, sort_keys=True, separators=(",", ":"))]
            argv += option_argv
            entry["argv"] = argv

    # memory, judged once every rank has its table: in tensor-parallel the fix is the group's one share
    group = None
    if topology == "tensor_parallel":
        share_limits = {
            host: _memory.max_share(avail, other, margin, mem) for host, (_t, mem, avail, other) in judged.items()
        }
        group = {"set_by": share_set_by, "max_share": _plan_tp.group_max_share(share_limits)}
        _check_tp_worker_values(profile, head, workers, group, violations)
        summary = _plan_tp.group_memory({h: judged[h][0] for h in judged}, group_share, share_set_by, context_length)
        summary["heads"] = heads
        result["group"] = summary
        group["kv_rank"] = (summary["kv_tokens_ranks"] or [None])[0]
    for host, (table, total, available, reserve) in judged.items():
        _check_memory(
            host, table, margin, total, available, reserve, spec_config, context_length, violations, group=group
        )

    if topology == "tensor_parallel":
        _check_tp_group(profile, hosts, nodes, violations)
    if catalog:
        # Backstop: refused options never reach the argv, so the planned argv must parse strictly as it is.
        for host, entry in result["nodes"].items():
            errors = _vllm_catalog.parse_argv(catalog, entry["argv"][2:])[2] if entry["argv"] else ()
            violations.extend(
                _violation(host, "vllm_argv_parse", error, f"the planned argv does not parse: {error}")
                for error in errors
            )
    return result


def _check_pinned_flags(catalog, topology, spec_config, violations):
    """Options the plan writes itself must exist in the pinned release (they are not from vllm_options)."""
    needed = ["--served-model-name", "--max-model-len", "--gpu-memory-utilization", "--max-num-seqs", "--port"]
    if topology == "tensor_parallel":
        needed += ["--tensor-parallel-size", "--distributed-executor-backend"]
    if spec_config:
        needed.append("--speculative-config")
    for flag in needed:
        if flag not in catalog["options"]:
            violations.append(
                _violation(
                    ALL_NODES,
                    "vllm_flag_unknown",
                    flag,
                    "vLLM {} has no {}, which this profile needs: pin an image whose vLLM release has it".format(
                        catalog["vllm_version"], flag
                    ),
                )
            )


def _check_tp_node(host, node, facts, env, cidr, violations):
    address = node.get("fabric_address")
    try:
        ip = ipaddress.ip_address(str(address))
    except ValueError:
        ip = None
        violations.append(
            _violation(
                host,
                "tp_node_ip",
                address,
                f"gb10_fabric_address of {host} is {address!r}, not an IP address: "
                "set it to the node's address on the fabric",
            )
        )
    if ip is not None and cidr is not None and ip not in cidr:
        violations.append(
            _violation(
                host,
                "tp_node_ip",
                str(ip),
                f"Ray --node-ip-address of {host} is {ip}, outside the fabric subnet {cidr}: NCCL would route "
                f"the collective over another network. Set gb10_fabric_address to {host}'s address on {cidr}",
            )
        )
    if env.get("VLLM_HOST_IP") != str(address):
        violations.append(
            _violation(
                host,
                "tp_vllm_host_ip",
                env.get("VLLM_HOST_IP"),
                "VLLM_HOST_IP on {} is {} but its Ray --node-ip-address is {}: they must be equal. Remove "
                "VLLM_HOST_IP from the profile's env (the plan sets it per node from gb10_fabric_address)".format(
                    host, env.get("VLLM_HOST_IP"), address
                ),
            )
        )
    interfaces = facts.get("interfaces") or {}
    for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        name = env.get(var)
        if name not in interfaces:
            violations.append(
                _violation(
                    host,
                    "tp_socket_ifname",
                    name,
                    "{var}={name} on {host} names no interface of that node (it has {has}): set "
                    "gb10_fabric_interface to the interface that holds {address}, and remove {var} from the "
                    "profile's env".format(
                        var=var, name=name, host=host, has=", ".join(sorted(interfaces)) or "none", address=address
                    ),
                )
            )
            continue
        held = str(interfaces[name]).split("/", maxsplit=1)[0]
        if held != str(address):
            violations.append(
                _violation(
                    host,
                    "tp_socket_ifname",
                    name,
                    f"{var}={name} on {host}, but {name} holds {held}, not the node's fabric address {address}: "
                    f"point gb10_fabric_interface at the interface with {address} (or fix gb10_fabric_address)",
                )
            )
    if env.get("RAY_memory_monitor_refresh_ms") != "0":
        violations.append(
            _violation(
                host,
                "tp_ray_memory_monitor",
                env.get("RAY_memory_monitor_refresh_ms"),
                f"RAY_memory_monitor_refresh_ms on {host} is {env.get('RAY_memory_monitor_refresh_ms')!r}: Ray's "
                "memory monitor kills workers on unified memory, where the model's allocation is host memory. "
                "Remove it from the profile's env (the plan sets 0)",
            )
        )


def _check_tp_group(profile, hosts, nodes, violations):
    backend = (profile.get("vllm_options") or {}).get("distributed-executor-backend")
    if backend is not None and backend != "ray":
        violations.append(
            _violation(
                ALL_NODES,
                "tp_executor_backend",
                backend,
                f"--distributed-executor-backend {backend} across {len(hosts)} nodes: vLLM does not infer Ray from "
                f"a live cluster and fails with 'World size ({len(hosts)}) is larger than the number of available "
                "GPUs (1)'. Set it to ray",
            )
        )
    seen = {}
    for host in hosts:
        address = (nodes.get(host) or {}).get("fabric_address")
        if address in seen:
            violations.append(
                _violation(
                    host,
                    "tp_node_ip",
                    address,
                    f"{seen[address]} and {host} both have fabric address {address}: every Ray node needs its own "
                    "address; fix gb10_fabric_address",
                )
            )
        else:
            seen[address] = host


def _check_heads(attention, topology, tp_size, node_count, shape_failed, violations):
    """Stated head counts (``model.attention.num_heads`` / ``num_kv_heads``) and, in tensor-parallel, whether
    they split over the group's ranks. Returns what the plan reports about them (``checked`` False when the
    profile states none: the plan runs offline and cannot read the snapshot's config.json)."""
    heads, kv_heads, problems = _plan_tp.stated_heads(attention)
    for field, problem in problems:
        if field == "num_kv_heads" and shape_failed:
            continue  # already refused as part of the attention shape
        value = (attention or {}).get(field) if field else [heads, kv_heads]
        violations.append(_violation(ALL_NODES, "model_attention_heads", value, problem))
    summary = {
        "num_heads": heads,
        "num_kv_heads": kv_heads,
        "tensor_parallel_size": tp_size,
        "checked": False,
        "fit": None,
    }
    if topology != "tensor_parallel" or tp_size < 2 or (heads is None and kv_heads is None) or problems:
        return summary
    summary["checked"] = True
    misfits = _plan_tp.heads_fit(heads, kv_heads, tp_size)
    summary["fit"] = not misfits
    if misfits:
        sizes = _plan_tp.fitting_sizes(heads, kv_heads, node_count)
        fix = (
            "make the group (gb10_ray_head + gb10_ray_workers) {} nodes".format(" or ".join(map(str, sizes)))
            if sizes
            else f"no group of 2 to {node_count} nodes of this inventory fits: serve the model as replicas"
        )
        violations.append(
            _violation(
                ALL_NODES,
                "tp_heads_divisible",
                tp_size,
                "the tensor-parallel group has {} ranks and model.attention states {}: {}. Fix: {}".format(
                    tp_size,
                    " and ".join(
                        f"{count} {label}"
                        for count, label in ((heads, "attention heads"), (kv_heads, "KV heads"))
                        if count is not None
                    ),
                    "; ".join(misfits),
                    fix,
                ),
            )
        )
    return summary


def _check_tp_worker_values(profile, head, workers, group, violations):
    """Refuse per-node values on Ray workers that only ``vllm serve`` reads (the head's argv holds for all)."""
    for worker, key, value in _plan_tp.worker_values(profile, workers):
        flag, why = _plan_tp.HEAD_ONLY[key]
        group_value, set_by = _plan_tp.group_setting(profile, head, key)
        if key == "gpu_memory_utilization" and group.get("max_share") is not None:
            fix = "; at most {} keeps every rank at its margin here (the tighter node is the real budget)".format(
                _fmt(group["max_share"])
            )
        else:
            fix = ""
        violations.append(
            _violation(
                worker,
                "tp_per_node_value",
                value,
                f"nodes.{worker}.{key} is {value!r}, but {worker} is a Ray worker of the tensor-parallel group and "
                f"runs no vllm serve: {why} (the head's {flag} is {group_value!r}, from {set_by}), so this value "
                f"changes nothing on {worker}. Remove nodes.{worker}.{key} and set the group's one value in "
                f"{set_by}{fix}",
            )
        )


def _check_memory(host, table, margin, total, available, reserve, spec_config, context_length, violations, group=None):
    """One node's memory findings; ``group`` (tensor-parallel) gives the group's share source and limit."""
    share = table["gpu_memory_utilization"]
    if table["headroom_gib"] < margin:
        best = _memory.max_share(available, reserve, margin, total)
        if group is None:
            fix = (
                f"Lower nodes.{host}.gpu_memory_utilization to {_fmt(best)} or less "
                "(judged on this node's own figures; the tighter node is the real budget)"
            )
        else:
            fix = (
                "vLLM applies the head's --gpu-memory-utilization {share} to every rank, so lower the group's value "
                "({set_by}) to {best} or less (every rank judged on its own figures; the tighter node is the real "
                "budget)".format(share=share, set_by=group["set_by"], best=_fmt(group["max_share"]))
            )
        violations.append(
            _violation(
                host,
                "memory_headroom",
                table["headroom_gib"],
                "{host} keeps {headroom} GiB for the host: MemAvailable {available} GiB - other work {reserve} GiB "
                "- vLLM budget {budget} GiB ({share} x {total} GiB) is below the margin {margin} GiB. {fix}".format(
                    host=host,
                    headroom=_fmt(table["headroom_gib"]),
                    available=_fmt(available),
                    reserve=_fmt(reserve),
                    budget=_fmt(table["budget_gib"]),
                    share=share,
                    total=_fmt(total),
                    margin=_fmt(margin),
                    fix=fix,
                ),
            )
        )
    if table["kv_cache_gib"] <= 0 or table["kv_cache_gib"] > table["kv_room_gib"]:
        spec_note = (
            " (speculative decoding is on: its drafter's {} GiB comes out of the KV budget)".format(
                _fmt(table["drafter_gib"])
            )
            if spec_config
            else ""
        )
        violations.append(
            _violation(
                host,
                "memory_kv_budget",
                table["kv_cache_gib"],
                "{} has no room for the KV cache{}: budget {} GiB - weights {} GiB - drafter {} GiB - activation "
                "reserve {} GiB = {} GiB{}. Raise gpu_memory_utilization (if headroom allows), shrink the drafter "
                "or turn speculative decoding off, or use a smaller checkpoint".format(
                    host,
                    spec_note,
                    _fmt(table["budget_gib"]),
                    _fmt(table["weights_gib"]),
                    _fmt(table["drafter_gib"]),
                    _fmt(table["activation_reserve_gib"]),
                    _fmt(table["kv_room_gib"]),
                    ""
                    if table["kv_cache_source"] == "computed"
                    else ", but --kv-cache-memory-bytes asks for {} GiB".format(_fmt(table["kv_cache_gib"])),
                ),
            )
        )
    elif (
        table["kv_tokens"] is not None
        and context_length
        and table["kv_tokens"] < context_length
        and (group is None or host == group.get("kv_rank"))  # tensor-parallel: once, for the group
    ):
        violations.append(
            _violation(
                host,
                "memory_kv_context",
                table["kv_tokens"],
                f"{host}'s KV cache of {_fmt(table['kv_cache_gib'])} GiB holds {table['kv_tokens']} tokens"
                + ("" if group is None else ", the group's (vLLM sizes every rank's cache by its smallest rank)")
                + f", fewer than one request at context_length {context_length}: vLLM refuses to start. Lower "
                f"context_length to {table['kv_tokens']} or less, or free memory for the KV cache",
            )
        )


_MEMORY_ROWS = (
    ("mem_total_gib", "MemTotal", "GiB"),
    ("mem_available_gib", "MemAvailable", "GiB"),
    ("gpu_memory_utilization", "gpu-memory share", ""),
    ("budget_gib", "vLLM budget (share x total)", "GiB"),
    ("weights_gib", "- resident weights", "GiB"),
    ("drafter_gib", "- drafter", "GiB"),
    ("activation_reserve_gib", "- activation reserve", "GiB"),
    ("kv_cache_gib", "= KV cache", "GiB"),
    ("kv_tokens", "KV tokens", ""),
    ("requests_at_full_context", "requests at full context", ""),
    ("other_work_reserve_gib", "other work reserve", "GiB"),
    ("headroom_gib", "host headroom (avail - other - budget)", "GiB"),
    ("margin_gib", "required margin", "GiB"),
)


def _shell_word(word):
    if word and all(c.isalnum() or c in "-_./=:,@+" for c in word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"


def _group_lines(group, size):
    """The tensor-parallel group's block of ``format_plan``: what vLLM runs every rank at."""
    lines = [
        f"== tensor-parallel group ({size} ranks; vllm serve on the head drives them all)",
        "gpu-memory share on every rank: {} (from {}; vLLM applies the head's --gpu-memory-utilization to every "
        "rank, so every rank is judged at it)".format(_fmt(group.get("gpu_memory_utilization")), group.get("set_by")),
    ]
    if group.get("kv_tokens") is not None:
        lines.append(
            "KV tokens of the group: {} ({}; vLLM sizes the cache by the rank with the fewest blocks){}".format(
                group["kv_tokens"],
                "the smallest rank's, " + group["kv_tokens_ranks"][0]
                if len(group["kv_tokens_ranks"]) == 1
                else "the same on " + ", ".join(group["kv_tokens_ranks"]),
                ""
                if group.get("requests_at_full_context") is None
                else "; {} requests at full context".format(_fmt(group["requests_at_full_context"])),
            )
        )
    if group.get("tightest_node") is not None:
        lines.append(f"tightest headroom: {group['tightest_node']} {_fmt(group['headroom_gib'])} GiB")
    heads = group.get("heads") or {}
    if heads.get("checked"):
        stated = ", ".join(
            f"{count} {label}"
            for count, label in ((heads.get("num_heads"), "attention heads"), (heads.get("num_kv_heads"), "KV heads"))
            if count is not None
        )
        verdict = "they split over the ranks" if heads.get("fit") else "they do NOT split: see tp_heads_divisible"
        lines.append(f"heads: {stated} over {size} ranks (checked: {verdict})")
    else:
        lines.append(
            f"heads: not checked against {size} ranks (state model.attention.num_heads and num_kv_heads from the "
            "snapshot's config.json: num_attention_heads, num_key_value_heads)"
        )
    return lines


def format_plan(result):
    """The plan as readable text: one block per node (argv, env, Ray, memory table), then the violations."""
    lines = [
        f"profile {result['profile']}: topology {result['topology']}, "
        f"tensor-parallel size {result.get('tensor_parallel_size')}",
        f"image {result.get('image')} (vLLM {result.get('vllm_version')})",
    ]
    for host, entry in sorted(result["nodes"].items()):
        lines.append("")
        lines.append(f"== {host} ({entry['role']})")
        if entry.get("argv"):
            lines.append("argv: " + " ".join(_shell_word(w) for w in entry["argv"]))
        else:
            lines.append("argv: (none: the head's vllm serve drives this node through Ray)")
        if entry.get("ray_start"):
            lines.append("ray:  " + " ".join(entry["ray_start"]))
        lines.append("snapshot: " + str(entry.get("snapshot_path")))
        lines.append("env:")
        lines.extend(f"  {key}={value}" for key, value in entry.get("env", {}).items())
        memory = entry.get("memory") or {}
        if memory:
            lines.append("memory:")
            for key, label, unit in _MEMORY_ROWS:
                value = memory.get(key)
                if value is None:
                    continue
                lines.append(f"  {label:<40} {_fmt(value):>12} {unit}".rstrip())
        sources = entry.get("facts_source") or {}
        if sources:
            lines.append("figures: " + ", ".join(f"{k} from {v}" for k, v in sorted(sources.items())))
    group = result.get("group")
    if group:
        lines.append("")
        lines.extend(_group_lines(group, result.get("tensor_parallel_size")))
    lines.append("")
    violations = result.get("violations") or []
    if violations:
        lines.append(f"VIOLATIONS ({len(violations)}):")
        lines.extend(f"- [{v['node']}] {v['rule']}: {v['message']}" for v in violations)
    else:
        lines.append("no violations")
    return "\n".join(lines)
