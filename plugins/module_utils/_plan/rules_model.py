# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Rules on the image, the model and the profile-wide fields (topology, speculative decoding, sizes)."""

from __future__ import annotations

import json
import re

from .. import _answer_check
from . import tp as _tp
from .checks import refuse, refuse_given, unmatched
from .context import TOPOLOGIES
from .registry import rule
from .violation import ALL_NODES, violation

# [host[:port]/]path@sha256:<64 hex>: a ':' is allowed only as the registry's port, so name:tag@digest (where Docker
# silently ignores the tag) is refused like a bare tag. Path components as the distribution reference grammar has them.
DIGEST_REF_RE = re.compile(
    r"^(?P<repo>(?:[a-zA-Z0-9.-]+(?::[0-9]+)?/)?[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
    r"(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)@sha256:(?P<digest>[0-9a-f]{64})\Z"
)
_REVISION_RE = re.compile(r"^[0-9a-f]{40}\Z")
_REPO_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*\Z")

# The context ladder's recall checks (plugins/module_utils/_ladder.RECALL_CHECKS: a unit test keeps them equal).
CONTEXT_RECALLS = ("needle", "prompt_tokens")

_SPEC = "seed 004: speculative decoding trading KV budget"
_MAX_JOBS = "seed 004: FlashInfer JIT as a memory bomb (MAX_JOBS)"


@rule("image_not_digest", pitfall="seed 004: digest-pinned community image")
def image_not_digest(ctx):
    match = DIGEST_REF_RE.match(ctx.ref)
    if not match or ":" in match.group("repo").rsplit("/", 1)[-1]:
        yield violation(
            ALL_NODES,
            "image_not_digest",
            ctx.ref or None,
            f"image.ref {ctx.ref!r} is not pinned by digest: a tag can move under you. Write it as "
            "<repository>@sha256:<64 hex> without a tag (docker buildx imagetools inspect <ref> prints the digest)",
        )


@rule("vllm_catalog_missing", pitfall="seed 004: vLLM flags that look right and are not")
def vllm_catalog_missing(ctx):
    if ctx.catalog_error is not None:
        yield violation(
            ALL_NODES, "vllm_catalog_missing", ctx.vllm_version or None, f"image.vllm_version: {ctx.catalog_error}"
        )


@rule("model_repo_id", pitfall="input validation")
def model_repo_id(ctx):
    return unmatched(
        "model_repo_id", _REPO_ID_RE, ctx.repo_id, f"model.repo_id must be <org>/<name>, got {ctx.repo_id!r}"
    )


@rule("model_revision_not_pinned", pitfall="seed 004: digest-pinned community image (a branch moves like a tag)")
def model_revision_not_pinned(ctx):
    return unmatched(
        "model_revision_not_pinned",
        _REVISION_RE,
        ctx.revision,
        f"model.revision {ctx.revision!r} is not a commit: pin the 40-hex commit id (a branch such as 'main' moves)",
    )


@rule("served_model_name_missing", pitfall="seed 004: repo id vs local snapshot path")
def served_model_name_missing(ctx):
    if not ctx.served_name:
        yield violation(
            ALL_NODES,
            "served_model_name_missing",
            None,
            "model.served_model_name is not set: the server is started on a local snapshot path, so without "
            "--served-model-name clients would have to ask for that path. Set it (e.g. %r)"
            % (ctx.repo_id.rsplit("/", 1)[-1] or "my-model"),
        )


@rule("topology_unknown", pitfall="input validation")
def topology_unknown(ctx):
    message = "topology {!r} is not one of {}".format(ctx.topology, ", ".join(TOPOLOGIES))
    yield from refuse(ctx.topology not in TOPOLOGIES, "topology_unknown", ctx.topology, message)


@rule("tp_group", pitfall="seed 000: tensor-parallel 2 over Ray across two nodes")
def tp_group(ctx):
    if not ctx.tensor_parallel:
        return
    if not ctx.head:
        yield violation(
            ALL_NODES,
            "tp_group",
            ctx.ray_head,
            f"tensor_parallel needs exactly one host in gb10_ray_head that is also in gb10_nodes; got {ctx.ray_head!r}",
        )
    if ctx.stray_workers or not (ctx.workers or ctx.stray_workers):
        stray = ctx.stray_workers
        yield violation(
            ALL_NODES,
            "tp_group",
            ", ".join(stray) or None,
            "tensor_parallel needs at least one gb10_ray_workers host, each also in gb10_nodes; %s"
            % ("not in gb10_nodes: " + ", ".join(stray) if stray else "gb10_ray_workers is empty"),
        )


@rule("no_nodes", pitfall="input validation")
def no_nodes(ctx):
    if not ctx.hosts:
        yield violation(ALL_NODES, "no_nodes", None, "group gb10_nodes has no hosts: nothing to plan")


@rule("speculative_config", pitfall=_SPEC)
def speculative_config(ctx):
    if ctx.spec_enabled and ctx.spec_config is None:
        spec = ctx.spec
        yield violation(
            ALL_NODES,
            "speculative_config",
            json.dumps(spec, sort_keys=True),
            "speculative needs method (e.g. mtp) and num_tokens >= 1, got method={!r} num_tokens={!r}".format(
                spec.get("method"), spec.get("num_tokens")
            ),
        )


@rule("speculative_drafter_size", pitfall=_SPEC)
def speculative_drafter_size(ctx):
    if ctx.spec_enabled and ctx.spec.get("drafter_gib") is None:
        yield violation(
            ALL_NODES,
            "speculative_drafter_size",
            None,
            "speculative.drafter_gib is not set: the drafter's weights come out of the KV budget; state "
            "its size in GiB (0 only when it shares the model's weights)",
        )


@rule("context_length", pitfall="seed 004: the context ladder with abort criteria")
def context_length(ctx):
    message = "context_length must be a positive integer (it becomes --max-model-len), got {given!r}"
    return refuse_given(ctx, "context_length", ctx.context_length is None, "context_length", message)


@rule("max_jobs_missing", pitfall=_MAX_JOBS)
def max_jobs_missing(ctx):
    message = (
        "max_jobs is {given!r}: MAX_JOBS defaults to the CPU count and the FlashInfer JIT then runs that many "
        "~1.2-5 GiB compiler processes on top of the resident weights. Set max_jobs (2 while a model is resident) "
        "and the plan forwards MAX_JOBS to every container"
    )
    return refuse_given(ctx, "max_jobs", ctx.max_jobs is None, "max_jobs_missing", message)


@rule("not_a_number", pitfall="input validation")
def not_a_number(ctx):
    # derivation falls back to the default for a figure that is not a number and keeps what it found
    return list(ctx.not_numbers)


@rule("model_checkpoint_size", pitfall="seed 004: the tighter node being the real budget")
def model_checkpoint_size(ctx):
    message = "model.checkpoint_gib must state the checkpoint's size in GiB (it decides the memory budget)"
    yield from refuse(ctx.checkpoint <= 0, "model_checkpoint_size", ctx.model.get("checkpoint_gib"), message)


@rule("model_attention_shape", pitfall="seed 004: speculative decoding trading KV budget (the KV cache's size)")
def model_attention_shape(ctx):
    if ctx.attention_error is not None:
        yield violation(
            ALL_NODES,
            "model_attention_shape",
            json.dumps(ctx.attention, sort_keys=True),
            f"model.attention is incomplete ({ctx.attention_error}): give kv_bytes_per_token, or kind gqa with "
            "num_layers, num_kv_heads, head_dim, or kind mla with num_layers, kv_lora_rank, qk_rope_head_dim",
        )


@rule("model_attention_heads", pitfall="input validation")
def model_attention_heads(ctx):
    heads, kv_heads, problems = _tp.stated_heads(ctx.attention)
    for field, problem in problems:
        if field == "num_kv_heads" and ctx.attention_error is not None:
            continue  # already refused as part of the attention shape
        value = (ctx.attention or {}).get(field) if field else [heads, kv_heads]
        yield violation(ALL_NODES, "model_attention_heads", value, problem)


@rule("kv_cache_memory_bytes", pitfall="input validation")
def kv_cache_memory_bytes(ctx):
    # A value vLLM's parser refuses is vllm_flag_type's (one verdict per value); this is what it takes and the plan
    # cannot size, such as "None" (no explicit cache at all).
    refused = any(f["rule"] == "vllm_flag_type" and f["value"] == ctx.explicit_kv for f in ctx.option_findings)
    if ctx.explicit_kv_invalid and not refused:
        yield violation(
            ALL_NODES,
            "kv_cache_memory_bytes",
            ctx.explicit_kv,
            f"--kv-cache-memory-bytes {ctx.explicit_kv!r} is not a size: write bytes or a vLLM size such as 6G",
        )


_AT_START = "issue 16: the plan refuses before a model load what vLLM refuses at start"


@rule("model_config_facts", pitfall="input validation")
def model_config_facts(ctx):
    given = ctx.model.get("max_position_embeddings")
    if ctx.max_positions is None:
        yield violation(
            ALL_NODES,
            "model_config_facts",
            given,
            f"model.max_position_embeddings must be the model's length in tokens from the snapshot's config.json "
            f"(a positive whole number), got {given!r}: vLLM refuses a --max-model-len above it at start",
        )
    layers = ctx.model.get("mtp_layers")
    if layers is not None and ctx.mtp_layers is None:
        yield violation(
            ALL_NODES,
            "model_config_facts",
            layers,
            f"model.mtp_layers must be the number of multi-token-prediction layers the checkpoint ships (config.json's "
            f"num_nextn_predict_layers; 0 for none), got {layers!r}",
        )


@rule("context_length_above_model", pitfall=_AT_START)
def context_length_above_model(ctx):
    length, limit = ctx.context_length, ctx.max_positions
    if length is None or limit is None or length <= limit or ctx.allow_long_context:
        return
    yield violation(
        ALL_NODES,
        "context_length_above_model",
        length,
        f"context_length {length} (--max-model-len) is above the model's length: model.max_position_embeddings is "
        f"{limit}, and vLLM refuses a longer --max-model-len at start (ValueError: User-specified max_model_len "
        f"({length}) is greater than the derived max_model_len). Set context_length to at most {limit}, or serve a "
        f"checkpoint made for {length} tokens (env VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 lets vLLM start, but RoPE "
        f"positions past {limit} give NaN)",
    )


def _mtp(method):
    # vLLM 0.32 takes the model-specific names (deepseek_mtp, glm4_moe_mtp, ...) as deprecated spellings of mtp
    return method == "mtp" or method.endswith("_mtp")


@rule("speculative_method_model", pitfall=_AT_START)
def speculative_method_model(ctx):
    config = ctx.spec_config
    if not config or not _mtp(str(config["method"])) or config.get("model"):
        return  # MTP from another checkpoint (speculative.model) has that checkpoint's layers
    layers, tokens = ctx.mtp_layers, config["num_speculative_tokens"]
    if layers is None and ctx.model.get("mtp_layers") is not None:
        return  # stated but not a count: model_config_facts says so
    instead = (
        "use speculative.method ngram (prompt lookup: no drafter weights, drafter_gib 0) or a draft model "
        "(speculative.model)"
    )
    if layers is None:
        message = (
            f"speculative.method {config['method']} drafts with the checkpoint's own MTP layers, and "
            "model.mtp_layers does not say it has any: state config.json's num_nextn_predict_layers as "
            f"model.mtp_layers (0 when it has none), or {instead}"
        )
    elif layers == 0:
        message = (
            f"speculative.method {config['method']} needs the checkpoint's MTP layers and model.mtp_layers is 0: "
            f"vLLM refuses it at start (\"Unsupported speculative method: 'mtp'\"); {instead}"
        )
    elif tokens > layers and tokens % layers:
        message = (
            f"speculative.num_tokens {tokens} is more than the checkpoint's {layers} MTP layers and not a multiple "
            f"of them: vLLM refuses it at start (num_speculative_tokens:{tokens} must be divisible by "
            f"n_predict={layers}). Use {layers} or a multiple of it"
        )
    else:
        return
    yield violation(ALL_NODES, "speculative_method_model", config["method"], message)


@rule("context_recall_unknown", pitfall="input validation")
def context_recall_unknown(ctx):
    recall = ctx.profile.get("context_recall")
    if recall is None or recall in CONTEXT_RECALLS:
        return
    yield violation(
        ALL_NODES,
        "context_recall_unknown",
        recall,
        f"context_recall is {recall!r}: the context ladder knows {', '.join(CONTEXT_RECALLS)} (needle: every "
        "recall answer must hold the code buried in the prompt, for a model that follows the question; "
        "prompt_tokens: every replica must take the whole prompt in, for one that does not). Leave it out for needle",
    )


@rule("answer_check_invalid", pitfall="issue 40: item 4")
def answer_check_invalid(ctx):
    """The rolling upgrade's answer check (roles/upgrade_node): the profile's greedy prompts, their length and how
    many may differ, checked before any node changes (_answer_check.settings says what is wrong)."""
    given = ctx.profile.get("answer_check")
    try:
        _answer_check.settings(given)
    except ValueError as err:
        yield violation(
            ALL_NODES,
            "answer_check_invalid",
            given,
            f"{err}. Leave answer_check out for the default set ({len(_answer_check.DEFAULT_PROMPTS)} prompts, "
            f"{_answer_check.DEFAULT_MAX_TOKENS} tokens each, none may differ)",
        )
