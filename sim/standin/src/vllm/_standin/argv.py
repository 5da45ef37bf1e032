"""`vllm serve` argv, parsed against the pinned flag catalog with the real parser's semantics.

vLLM 0.32.0's parser is an argparse parser with ``allow_abbrev`` on, wrapped by FlexibleArgumentParser (which
turns ``--max_num_seqs`` into ``--max-num-seqs`` and ``--speculative-config.method mtp`` into a JSON value). So
this module ACCEPTS a unique prefix (``--kv-cache-memory`` is ``--kv-cache-memory-bytes``), exactly as the real
engine does; refusing abbreviations is the serving plan's job, not the engine's. It refuses what argparse refuses,
with argparse's words and exit status 2: unknown options, ambiguous prefixes, missing values, invalid choices and
values that the option's type cannot convert (JSON-valued options).
"""

from __future__ import annotations

import json
import os
import re

VLLM_VERSION = "0.32.0"
DEFAULT_MODEL = "Qwen/Qwen3-0.6B"
USAGE = "usage: vllm serve [model_tag] [options]"
PROG = "vllm serve"

_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_JSON_DICT = re.compile(r"(?s)^\s*{.*}\s*$")


class ArgvError(Exception):
    """What argparse would print after ``vllm serve: error:`` (exit status 2)."""


def _catalog_candidates():
    here = os.path.dirname(os.path.abspath(__file__))
    name = f"vllm-{VLLM_VERSION}.json"
    explicit = os.environ.get("GB10_STANDIN_CATALOG")
    if explicit:
        yield explicit
    yield os.path.join(here, "catalog", name)
    # A plain checkout (unit tests): sim/standin/src/vllm/_standin -> repository root.
    root = os.path.abspath(os.path.join(here, *[os.pardir] * 5))
    yield os.path.join(root, "plugins", "module_utils", "vllm_catalog", name)


def load_catalog():
    """The catalog shipped inside the package (or the repository's, from a checkout)."""
    for path in _catalog_candidates():
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
            if data.get("vllm_version") != VLLM_VERSION or not isinstance(data.get("options"), dict):
                raise RuntimeError(f"{path} is not the flag catalog of vLLM {VLLM_VERSION}")
            return data
    raise RuntimeError(f"no flag catalog of vLLM {VLLM_VERSION} found")


def _normalise(argv):
    """FlexibleArgumentParser's rewrites: underscores in long names, dotted keys of JSON options."""
    out, dotted = [], {}
    index = 0
    while index < len(argv):
        word = argv[index]
        index += 1
        if not word.startswith("--") or word == "--":
            out.append(word)
            continue
        key, has_value, value = word.partition("=")
        head, dot, tail = key[2:].partition(".")
        key = "--" + head.replace("_", "-") + dot + tail
        if "." in key:
            base, _dot, path = key.partition(".")
            if not has_value:
                if index >= len(argv):
                    raise ArgvError(f"argument {base}.{path}: expected one argument")
                value = argv[index]
                index += 1
            try:
                parsed = json.loads(value)
            except ValueError:
                parsed = value
            node = dotted.setdefault(base, {})
            parts = path.split(".")
            for part in parts[:-1]:
                node = node.setdefault(part, {})
            node[parts[-1]] = parsed
            continue
        out.append(key + ("=" + value if has_value else ""))
    for base, tree in dotted.items():
        out.extend([base, json.dumps(tree)])
    return out


def _looks_optional(word, options):
    if not word or word[0] != "-" or word == "-":
        return False
    if word in options:
        return True
    if len(word) == 1:
        return False
    if "=" in word and word.split("=", 1)[0] in options:
        return True
    if _NEGATIVE_NUMBER.match(word):
        return False
    return " " not in word


def _resolve(word, options):
    """(option string, explicit value or None) as argparse would, or (None, None) when unknown."""
    if word in options:
        return word, None
    if "=" in word:
        name, value = word.split("=", 1)
        if name in options:
            return name, value
    if word.startswith("--"):
        prefix, _eq, value = word.partition("=")
        matches = sorted(o for o in options if o.startswith(prefix))
        explicit = value if "=" in word else None
    else:
        prefix, explicit = word, None
        matches = sorted(o for o in options if o.startswith(prefix) and not o.startswith("--"))
        if not matches and word[:2] in options and options[word[:2]].get("takes_value"):
            return word[:2], word[2:]
    if len(matches) > 1:
        raise ArgvError("ambiguous option: {} could match {}".format(word, ", ".join(matches)))
    if len(matches) == 1:
        return matches[0], explicit
    return None, None


def _convert(name, spec, value):
    if value is None:
        return None
    if spec.get("json_or_string") and not _JSON_DICT.match(value):
        return value
    if spec.get("json") and value not in ("", "None"):
        try:
            return json.loads(value)
        except ValueError as exc:
            raise ArgvError(f"argument {name}: Value {value} cannot be converted to {json.loads}.") from exc
    choices = spec.get("choices")
    if choices and value not in choices:
        raise ArgvError(
            "argument {}: invalid choice: {!r} (choose from {})".format(name, value, ", ".join(map(repr, choices)))
        )
    return value


def parse(catalog, argv):
    """Parse ``argv`` (the words after ``vllm serve``); return ``{dest: value}`` of what was given.

    ``model_tag`` holds the positional model. Switches are True (``--no-x`` gives False). Raises ArgvError.
    """
    options = catalog["options"]
    words = _normalise(list(argv))
    given, extras, positionals = {}, [], []
    index = 0
    only_positionals = False
    while index < len(words):
        word = words[index]
        index += 1
        if only_positionals or not _looks_optional(word, options):
            positionals.append(word)
            continue
        if word == "--":
            only_positionals = True
            continue
        name, explicit = _resolve(word, options)
        if name is None:
            extras.append(word)
            continue
        spec = options[name]
        if not spec.get("takes_value"):
            if explicit is not None:
                raise ArgvError(f"argument {name}: ignored explicit argument {explicit!r}")
            given[spec["dest"]] = not name.startswith("--no-")
            continue
        nargs = spec.get("nargs")
        values = [] if explicit is None else [explicit]
        if explicit is None:
            limit = 1 if nargs in (None, "?") else (nargs if isinstance(nargs, int) else len(words))
            while index < len(words) and len(values) < limit and not _looks_optional(words[index], options):
                values.append(words[index])
                index += 1
        if nargs is None and len(values) != 1:
            raise ArgvError(f"argument {name}: expected one argument")
        if nargs == "+" and not values:
            raise ArgvError(f"argument {name}: expected at least one argument")
        if isinstance(nargs, int) and len(values) != nargs:
            raise ArgvError(f"argument {name}: expected {nargs} arguments")
        converted = [_convert(name, spec, v) for v in values]
        given[spec["dest"]] = converted[0] if nargs in (None, "?") and converted else converted or None
    if positionals:
        given["model_tag"] = positionals[0]
        extras.extend(positionals[1:])
    if extras:
        raise ArgvError("unrecognized arguments: " + " ".join(extras))
    return given


def _int(name, value):
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise ArgvError(f"argument {name}: invalid int value: {value!r}") from exc


def _human_int(name, value):
    match = re.match(r"^(\d+(?:\.\d+)?)([kKmMgG]?)$", str(value))
    if not match:
        if str(value) in ("-1", "auto"):
            return None
        raise ArgvError(f"argument {name}: Value {value} cannot be converted to <function human_readable_int>.")
    number, unit = match.groups()
    scale = {"": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "K": 1024, "M": 1024**2, "G": 1024**3}[unit]
    return int(float(number) * scale)


def _float(name, value):
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise ArgvError(f"argument {name}: invalid float value: {value!r}") from exc


def engine_config(given):
    """The settings the stand-in honours, typed and checked as vLLM checks them (after parsing)."""
    model = given.get("model_tag") or given.get("model") or DEFAULT_MODEL
    served = given.get("served_model_name") or [model]
    if isinstance(served, str):
        served = [served]
    config = {
        "model": model,
        "served_model_name": list(served),
        "host": given.get("host") or "0.0.0.0",
        "port": _int("--port", given.get("port", 8000)),
        "max_num_seqs": _int("--max-num-seqs", given.get("max_num_seqs", 256)),
        "max_model_len": _human_int("--max-model-len", given["max_model_len"]) if "max_model_len" in given else None,
        "gpu_memory_utilization": _float("--gpu-memory-utilization", given.get("gpu_memory_utilization", 0.9)),
        "tensor_parallel_size": _int("--tensor-parallel-size", given.get("tensor_parallel_size", 1)),
        "distributed_executor_backend": given.get("distributed_executor_backend"),
        "enable_auto_tool_choice": bool(given.get("enable_auto_tool_choice")),
        "tool_call_parser": given.get("tool_call_parser"),
        "limit_mm_per_prompt": given.get("limit_mm_per_prompt"),
        "speculative_config": given.get("speculative_config"),
    }
    if config["max_num_seqs"] < 1:
        raise ValueError(f"max_num_seqs ({config['max_num_seqs']}) must be at least 1.")
    if not 0 < config["gpu_memory_utilization"] <= 1:
        raise ValueError(f"GPU memory utilization must be within (0, 1]. Got {config['gpu_memory_utilization']}.")
    if config["enable_auto_tool_choice"] and not config["tool_call_parser"]:
        raise TypeError("Error: --enable-auto-tool-choice requires --tool-call-parser")
    limits = config["limit_mm_per_prompt"]
    if limits is not None and not isinstance(limits, dict):
        raise ValueError(f"--limit-mm-per-prompt must be a JSON object, got {limits!r}")
    spec = config["speculative_config"]
    if spec is not None and not isinstance(spec, dict):
        raise ValueError(f"--speculative-config must be a JSON object, got {spec!r}")
    return config
