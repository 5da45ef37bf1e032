# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Rules on ``vllm_options`` against the flag catalog of the image's vLLM release, and the planned argv.

``argv.options`` gives every option one verdict (the first refusal, which also keeps it out of the argv);
each ``vllm_option_*`` / ``vllm_flag_*`` rule reports the verdicts of its name.
"""

from __future__ import annotations

import difflib
import json

from .. import _vllm_catalog
from .registry import rule
from .violation import ALL_NODES, violation

_FLAGS = "seed 004: vLLM flags that look right and are not"


def _verdicts(ctx, name):
    return [found for found in ctx.option_findings if found["rule"] == name]


def _reported(name):
    """Register the rule ``name``: it reports argv.options' verdicts of that name, and nothing of its own."""

    def check(ctx):
        return _verdicts(ctx, name)

    # repr() and introspection of RULES then name the rule, as they do for a rule written out as a def.
    check.__name__ = check.__qualname__ = name
    return rule(name, pitfall=_FLAGS)(check)


# Registration order is the order plans list violations in: keep vllm_flag_unknown between these two groups.
vllm_option_name = _reported("vllm_option_name")
vllm_option_owned_by_plan = _reported("vllm_option_owned_by_plan")
vllm_flag_abbreviated = _reported("vllm_flag_abbreviated")


@rule("vllm_flag_unknown", pitfall=_FLAGS)
def vllm_flag_unknown(ctx):
    yield from _verdicts(ctx, "vllm_flag_unknown")
    if not ctx.catalog:
        return
    # Options the plan writes itself must exist in the pinned release too (they are not from vllm_options).
    needed = ["--served-model-name", "--max-model-len", "--gpu-memory-utilization", "--max-num-seqs", "--port"]
    if ctx.tensor_parallel:
        needed += ["--tensor-parallel-size", "--distributed-executor-backend"]
    if ctx.spec_config:
        needed.append("--speculative-config")
    for flag in needed:
        if flag not in ctx.catalog["options"]:
            yield violation(
                ALL_NODES,
                "vllm_flag_unknown",
                flag,
                "vLLM {} has no {}, which this profile needs: pin an image whose vLLM release has it".format(
                    ctx.catalog["vllm_version"], flag
                ),
            )


vllm_flag_needs_value = _reported("vllm_flag_needs_value")
vllm_flag_takes_no_value = _reported("vllm_flag_takes_no_value")
vllm_flag_json_invalid = _reported("vllm_flag_json_invalid")
vllm_flag_json_shape = _reported("vllm_flag_json_shape")
vllm_flag_choice = _reported("vllm_flag_choice")
vllm_flag_type = _reported("vllm_flag_type")


@rule("vllm_parser_name", pitfall=_FLAGS)
def vllm_parser_name(ctx):
    if not ctx.catalog:
        return
    for option, kind, _enabled_by, plugin in _vllm_catalog.PARSER_OPTIONS:
        value = ctx.options.get(option)
        names = _vllm_catalog.parser_names(ctx.catalog, kind)
        if not isinstance(value, str) or value in ("", "None") or names is None or ctx.options.get(plugin):
            continue
        if value not in names:
            close = difflib.get_close_matches(value, names, n=3, cutoff=0.6)
            hint = f" (closest: {', '.join(close)})" if close else ""
            yield violation(
                ALL_NODES,
                "vllm_parser_name",
                value,
                f"--{option} {value!r} is not a registered parser of vLLM {ctx.catalog['vllm_version']}{hint}: "
                f"vllm serve refuses an unknown name at start (KeyError: invalid {option.replace('-', ' ')})"
                f"{' once --enable-auto-tool-choice is set' if option == 'tool-call-parser' else ''}. Use one of "
                f"{', '.join(names)}, or set vllm_options.{plugin} to the module that registers it",
            )


def _limits(options):
    value = options.get("limit-mm-per-prompt")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


@rule("text_only_mm_limits", pitfall="seed 004: vLLM flags that look right and are not (--skip-mm-profiling)")
def text_only_mm_limits(ctx):
    model = ctx.model
    if not model.get("multimodal") or not model.get("text_only", False):
        return
    modalities = list(model.get("modalities") or ("image", "video"))
    limits = _limits(ctx.options)
    if limits is None and ctx.options.get("limit-mm-per-prompt") is not None:
        return  # present but not a JSON object: reported once, by the flag rules
    limits = limits or {}
    wanted = json.dumps({m: 0 for m in modalities}, sort_keys=True, separators=(",", ":"))
    wrong = [m for m in modalities if limits.get(m) != 0]
    skip = bool(ctx.options.get("skip-mm-profiling"))
    if wrong:
        yield violation(
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


@rule("tool_choice_without_parser", pitfall="seed 002: a tool-calling test run before model switches")
def tool_choice_without_parser(ctx):
    if ctx.options.get("enable-auto-tool-choice") and not ctx.options.get("tool-call-parser"):
        yield violation(
            ALL_NODES,
            "tool_choice_without_parser",
            "--enable-auto-tool-choice",
            "--enable-auto-tool-choice is set without --tool-call-parser: vLLM refuses to start (or tool calls "
            "come back as plain text). Set vllm_options.tool-call-parser to the model's parser",
        )


@rule("vllm_argv_parse", pitfall=_FLAGS)
def vllm_argv_parse(ctx):
    # Backstop: refused options never reach the argv, so the planned argv must parse strictly as it is.
    if not ctx.catalog:
        return
    for host, entry in ctx.entries.items():
        errors = _vllm_catalog.parse_argv(ctx.catalog, entry["argv"][2:])[2] if entry["argv"] else ()
        for error in errors:
            yield violation(host, "vllm_argv_parse", error, f"the planned argv does not parse: {error}")
