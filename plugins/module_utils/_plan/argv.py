# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""What every node runs: the vLLM argv (from the profile's fields and its checked ``vllm_options``) and the
Ray start command. An option that a rule refuses never reaches the argv."""

from __future__ import annotations

import json

from .. import _vllm_catalog
from . import mp as _mp
from . import ray as _ray
from .inputs import secret_flag
from .violation import ALL_NODES, violation

RAY_PORT = 6379  # Ray's default GCS port, the plan's default ray.ports.gcs
ALL_INTERFACES = "0.0.0.0"

# Options the plan writes itself from the profile's structured fields or per-node overrides; giving them in
# vllm_options too would make two sources of truth (and a per-node value global).
PLAN_OWNED = {
    "model": "the plan passes the local snapshot path as the positional model argument",
    "served-model-name": "set model.served_model_name",
    "max-model-len": "set context_length",
    "gpu-memory-utilization": "set nodes.<host>.gpu_memory_utilization (or defaults.gpu_memory_utilization)",
    "max-num-seqs": "set nodes.<host>.max_num_seqs (or defaults.max_num_seqs)",
    "tensor-parallel-size": "the plan derives it from the tensor-parallel group (gb10_ray_head + gb10_ray_workers)",
    "speculative-config": "set speculative.method / speculative.num_tokens / speculative.drafter_gib",
    "host": "the server listens on the node's address; set port: for the port",
    "port": "set port:",
    "nnodes": "the plan derives it from the tensor-parallel group (launcher: mp)",
    "node-rank": "the plan gives each rank its own (the head 0, gb10_ray_workers in order from 1)",
    "master-addr": "the plan sets the head's fabric address (gb10_fabric_address of gb10_ray_head)",
    "master-port": "set mp.master_port",
    "headless": "the plan runs every rank but the head headless (launcher: mp)",
}


def option_argv(name, value, spec):
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


def check_json_shape(name, parsed):
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


def _other_releases(flag, version, catalog_dirs):
    """ " (vLLM 0.32.0 and 0.33.0 have it)": the other releases with a catalog whose parser has ``flag``, or ""."""
    others = [v for v in _vllm_catalog.releases_with(flag, catalog_dirs or ()) if v != version]
    return f" (vLLM {' and '.join(others)} {'has' if len(others) == 1 else 'have'} it)" if others else ""


def _negation(catalog, name):
    """The other option string of the switch ``--name`` (same dest, no value), when the release has exactly one."""
    spec = catalog["options"].get("--" + name)
    if not spec or spec.get("takes_value"):
        return None
    others = [
        option
        for option, other in catalog["options"].items()
        if other.get("dest") == spec.get("dest") and not other.get("takes_value") and option != "--" + name
    ]
    return others[0] if len(others) == 1 else None


def _verdict(name, value, catalog, catalog_dirs=()):
    """(refusal or None, value to write): the first rule that refuses one ``vllm_options`` entry."""
    version = catalog["vllm_version"]
    flag = "--no-" + name if value is False else "--" + name
    status, detail = _vllm_catalog.lookup(catalog, flag)
    if status == "abbreviation":
        return violation(
            ALL_NODES,
            "vllm_flag_abbreviated",
            flag,
            f"{flag} is not an option of vLLM {version}, only a prefix of {' / '.join(detail)}: vLLM's "
            "argparse expands it silently and breaks the day another option shares the prefix. Write the "
            "full option name in vllm_options",
        ), None
    if status == "unknown":
        hint = ("; did you mean {}?".format(" or ".join(detail))) if detail else ""
        negation = _negation(catalog, name) if value is False else None
        if negation:
            # vLLM 0.33.0 writes a switch's negation as its complement (--disable-prefix-caching), not --no-<name>
            hint = (
                f"; vLLM {version} negates --{name} as {negation}: write vllm_options.{negation[2:]}: true instead of "
                f"{name}: false"
            )
        return violation(
            ALL_NODES,
            "vllm_flag_unknown",
            flag,
            f"{flag} is not an option of vLLM {version} (misspelled, removed, or from another release)"
            f"{_other_releases(flag, version, catalog_dirs)}{hint} Remove it or use an option of image.vllm_version "
            f"{version}.",
        ), None
    spec = detail
    if spec.get("takes_value") and isinstance(value, bool):
        return violation(
            ALL_NODES,
            "vllm_flag_needs_value",
            flag,
            f"{flag} takes a value in vLLM {version}, got {value!r}: give the value, not true/false",
        ), None
    if not spec.get("takes_value") and not isinstance(value, bool):
        return violation(
            ALL_NODES,
            "vllm_flag_takes_no_value",
            flag,
            f"{flag} is a switch in vLLM {version} and takes no value, got {value!r}: "
            f"write true (or false for --no-{name})",
        ), None
    if spec.get("json") and not isinstance(value, bool):
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError as exc:
                return violation(
                    ALL_NODES,
                    "vllm_flag_json_invalid",
                    value,
                    f"--{name} needs valid JSON, {value!r} is not ({exc}): write it as a YAML mapping in "
                    "vllm_options and the plan serialises it",
                ), None
        shape = check_json_shape(name, value)
        if shape:
            return violation(
                ALL_NODES, "vllm_flag_json_shape", json.dumps(value, sort_keys=True), f"--{name} {shape}"
            ), None
    if spec.get("choices") and not isinstance(value, bool) and str(value) not in spec["choices"]:
        return violation(
            ALL_NODES,
            "vllm_flag_choice",
            value,
            "--{} {!r} is not accepted by vLLM {}: use one of {}".format(
                name, value, version, ", ".join(spec["choices"])
            ),
        ), None
    words = option_argv(name, value, spec)
    if not spec.get("json"):
        for word in words[1:]:
            problem = _vllm_catalog.value_error(spec, word)
            if problem:
                return violation(
                    ALL_NODES,
                    "vllm_flag_type",
                    value,
                    f"--{name} {problem}: vLLM {version}'s parser refuses it at start (exit 2). Write "
                    f"{_vllm_catalog.TYPE_WORDS[spec['type']]} in vllm_options.{name}",
                ), None
    return None, words


def options(profile_options, catalog, catalog_dirs=()):
    """``(argv words, findings)`` of ``vllm_options`` checked against the catalog (sorted: no churn).

    ``catalog_dirs``: the folders of the other releases' catalogs, which an unknown option's refusal names where one
    of them has it.

    One verdict per option, the first refusal: the rules ``vllm_option_*`` and ``vllm_flag_*`` report the
    findings of their name, and an option with a finding is left out of the argv.
    """
    argv, findings = [], []
    for key in sorted(profile_options, key=str):
        value = profile_options[key]
        name = str(key)
        if name.startswith("-"):
            findings.append(
                violation(
                    ALL_NODES,
                    "vllm_option_name",
                    name,
                    "vllm_options key {!r} starts with a dash; write the option name without dashes: {!r}".format(
                        name, name.lstrip("-")
                    ),
                )
            )
            name = name.lstrip("-")
        if name in PLAN_OWNED:
            findings.append(
                violation(
                    ALL_NODES,
                    "vllm_option_owned_by_plan",
                    f"--{name}",
                    f"--{name} is written by the plan, not by vllm_options: remove it; {PLAN_OWNED[name]}",
                )
            )
            continue
        if value is None or secret_flag(name):
            continue  # a secret never reaches the argv, which the plan prints (vllm_option_secret refuses it)
        refusal, words = _verdict(name, value, catalog, catalog_dirs)
        if refusal:
            findings.append(refusal)
        else:
            argv.extend(words)
    return argv, findings


def listen_host(ctx, host):
    """The address vLLM binds on ``host``: the node's own; every interface only when the profile says so."""
    if ctx.bind_all_interfaces:
        return ALL_INTERFACES
    address = ctx.per_node[host]["address"]
    return str(address) if address else None  # refused by replica_address_missing / tp_node_ip


def serve_argv(ctx, host):
    """The ``vllm serve`` argv of a node that runs vLLM: every replica; in tensor-parallel the head, and with the mp
    launcher every other rank too (the same argv, its own ``--node-rank`` and ``--headless``)."""
    figures = ctx.per_node[host]
    argv = ["vllm", "serve", ctx.entries[host]["container_snapshot_path"]]
    if ctx.served_name:
        argv += ["--served-model-name", str(ctx.served_name)]
    listen = listen_host(ctx, host)
    if listen:
        argv += ["--host", listen]
    argv += ["--port", str(ctx.port)]
    if ctx.context_length:
        argv += ["--max-model-len", str(ctx.context_length)]
    if figures["share_ok"]:
        argv += ["--gpu-memory-utilization", f"{figures['share']:g}"]
    max_seqs = figures["max_seqs"]
    if isinstance(max_seqs, int) and not isinstance(max_seqs, bool):
        argv += ["--max-num-seqs", str(max_seqs)]
    if ctx.tensor_parallel and ctx.launcher == "ray":
        argv += ["--tensor-parallel-size", str(ctx.tp_size), "--distributed-executor-backend", "ray"]
    elif ctx.tensor_parallel:
        argv += _mp.launch_argv(ctx.tp_size, ctx.entries[host]["rank"], ctx.head_address, ctx.mp_master_port)
    if ctx.spec_config:
        argv += ["--speculative-config", json.dumps(ctx.spec_config, sort_keys=True, separators=(",", ":"))]
    return argv + ctx.option_argv


def ray_start(role, address, head_address, ports=None):
    """``ray start`` of a tensor-parallel rank at its fabric address, every port fixed (``ray.py``), no dashboard.

    Authentication is not in argv: ``RAY_AUTH_MODE`` comes from the plan's env, the token from the serving role's
    root-only ray.env (Ray reads both only from the environment)."""
    ports = ports or _ray.DEFAULT_PORTS
    if role == "ray_head":
        return [
            "ray",
            "start",
            "--head",
            f"--node-ip-address={address}",
            *_ray.port_argv(ports, role),
            "--num-gpus=1",
            # No dashboard: nothing here reads it, it is one more HTTP entry point that runs jobs, and on a loaded
            # head it is the heaviest Ray process. --include-dashboard is head-only in ray start.
            "--include-dashboard=false",
            # An air-gapped site: no usage report leaves the head (head-only in effect).
            "--disable-usage-stats",
            "--block",
        ]
    return [
        "ray",
        "start",
        f"--address={head_address}:{ports['gcs']}",
        f"--node-ip-address={address}",
        *_ray.port_argv(ports, role),
        "--num-gpus=1",
        "--block",
    ]


def shell_word(word):
    if word and all(c.isalnum() or c in "-_./=:,@+" for c in word):
        return word
    return "'" + word.replace("'", "'\\''") + "'"
