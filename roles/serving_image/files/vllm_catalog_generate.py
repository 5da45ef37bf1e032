#!/usr/bin/env python
# Copyright: gb10.serving maintainers
# Apache-2.0
"""Dump the option list of the real ``vllm serve`` parser into the collection's flag catalog.

One generator for every release, run with the Python that has the release installed: a throwaway venv of the
release (``make vllm-catalogs``: sim/vllm_catalog/catalogs.sh, which writes the catalogs the collection ships under
``plugins/module_utils/vllm_catalog/``), or the gated serving image itself (roles/serving_image, for a release the
collection has no catalog of: ``--stdout``, in a throwaway container of the image). It builds the parser exactly as
``vllm serve`` does (``ServeSubcommand`` on a ``FlexibleArgumentParser`` sub-parser) and writes
``<out-dir>/vllm-<version>.json`` (or prints it with ``--stdout``):

    {"format": 2, "vllm_version": "...", "allow_abbrev": true, "prog": "vllm serve",
     "positionals": [{"dest": "model_tag", "nargs": "?"}],
     "options": {"--kv-cache-memory-bytes": {"dest": ..., "takes_value": true, "nargs": null,
                 "json": false, "json_or_string": false, "choices": null, "deprecated": false,
                 "type": "human_int", "optional": true}, ...},
     "normalisations": {"underscores": true, "dotted_json_keys": true},
     "registries": {"tool_call_parsers": [...], "reasoning_parsers": [...]},
     "parser_tokens": {"tool_call_parsers": {"llama3_json": ["<|python_tag|>"], ...}, "reasoning_parsers": {...},
                       "unprobed": {"tool_call_parsers": [...], "reasoning_parsers": [...]}}}

The parser is built on vLLM's CPU platform (``VLLM_TARGET_DEVICE=cpu``, set here unless the caller set it): the
gate's container has no GPU, and a CUDA build with no GPU detects no platform, whose ``DeviceConfig`` refuses to be
built ("RuntimeError: Failed to infer device type"; vLLM 0.33.0's CUDA wheel on a CPU-only machine). The option
list does not depend on it, with one exception the catalog records under ``platform``: ``--mm-processor-device``
adds the platform's device type to its choices (``auto``, ``cpu`` here; a GB10 also takes ``cuda``).

``takes_value`` is false for switches (store_true, BooleanOptionalAction's --x / --no-x). ``json`` marks options
whose value vLLM parses with json.loads (dicts and config dataclasses); ``json_or_string`` those that take
either a JSON object or a plain string. ``normalisations`` records what vLLM's FlexibleArgumentParser rewrites
before argparse sees it; the catalog's strict readers (the plan, the stand-in engine) do not.

Format 2 adds, per option, ``type``: the converter argparse calls on the value, read from the action's ``type``
callable (``TYPES``: ``int``, ``float``, ``str``, ``human_int`` (vLLM's human_readable_int: 4096, 8k, 8K),
``human_int_or_auto`` (the same, or -1 / auto: --max-model-len), ``json`` (json.loads), ``json_config`` (a config
dataclass validated from JSON), ``json_or_str`` (union_dict_and_str), ``switch`` (no value), ``other`` (a converter
the readers do not mirror: they check only its choices)) and ``optional`` (wrapped in vLLM's optional_type, which
also takes "" and "None"); and ``registries``: the names vLLM's ToolParserManager and ReasoningParserManager hold
at start, which ``vllm serve`` checks --tool-call-parser (with --enable-auto-tool-choice) and --reasoning-parser
against (vllm/entrypoints/launchers/launcher.py, validate_api_server_args). A --tool-parser-plugin or
--reasoning-parser-plugin registers more names at start, which no catalog can list.

``parser_tokens`` (format 2, optional: a catalog without it checks no tokenizer) holds, for each registered parser
that needs them, the tokens its constructor refuses to start without. `vllm serve` builds the parsers against the
model's tokenizer once the engine is up, after the model load (ParserManager.validate_parser_tokenizer: "cannot be
used with the tokenizer of ..."), so the plan hands these to the node, which checks the snapshot's tokenizer before a
replica starts (roles/model_weights). They are measured, not read from the source: each parser is built against a
vocabulary that records what it looks up, the tokens it looked up are added until it builds, then each one alone is
taken out; the tokens whose absence makes it raise are the ones listed. Parsers that need more of the tokenizer than
its vocabulary (``encode``) to build are ``unprobed``: their tokens are not checked.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

GENERATED_BY = "roles/serving_image/files/vllm_catalog_generate.py"


def _callable_mentions(func, names, depth=0):
    """True when ``func`` is, or closes over, a callable whose __name__ is in ``names``."""
    if func is None or depth > 4:
        return False
    if getattr(func, "__name__", None) in names:
        return True
    for cell in getattr(func, "__closure__", None) or ():
        try:
            inner = cell.cell_contents
        except ValueError:
            continue
        if callable(inner) and _callable_mentions(inner, names, depth + 1):
            return True
    return False


# The converters this script recognises, most specific first: a __qualname__ of the callable or of one it closes over.
TYPES = (
    ("_compute_kwargs.<locals>.parse_dataclass", "json_config"),
    ("union_dict_and_str", "json_or_str"),
    ("loads", "json"),
    ("human_readable_int_or_auto", "human_int_or_auto"),
    ("human_readable_int", "human_int"),
    ("int", "int"),
    ("float", "float"),
    ("str", "str"),
)


def _names(func, depth=0):
    """__qualname__ of ``func`` and of every callable it closes over (optional_type(parse_type(json.loads)))."""
    if func is None or depth > 4:
        return []
    found = [getattr(func, "__qualname__", None) or type(func).__name__]
    for cell in getattr(func, "__closure__", None) or ():
        try:
            inner = cell.cell_contents
        except ValueError:
            continue
        if callable(inner):
            found.extend(_names(inner, depth + 1))
    return found


def value_type(action):
    """``(type, optional)`` of an action: the converter argparse applies to its value (see the module doc)."""
    if action.nargs == 0:
        return "switch", False
    names = _names(action.type)
    optional = "optional_type.<locals>._optional_type" in names
    if action.type is None:
        return "str", False  # argparse keeps the word as it is
    # union_dict_and_str closes over nothing but calls optional_type(json.loads) itself: match outermost first
    for qualname, kind in TYPES:
        if qualname in names:
            return kind, optional
    return "other", optional


def registries():
    """The tool-call and reasoning parser names ``vllm serve`` accepts without a plugin."""
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    return {
        "tool_call_parsers": sorted(ToolParserManager.list_registered()),
        "reasoning_parsers": sorted(ReasoningParserManager.list_registered()),
    }


class _Looked(dict):
    """A vocabulary that holds ``present`` (at made-up ids) and records each token a parser looks up."""

    def __init__(self, present):
        super().__init__({token: 1000 + index for index, token in enumerate(present)})
        self.asked = []

    def _note(self, key):
        if isinstance(key, str) and key not in self.asked:
            self.asked.append(key)

    def get(self, key, default=None):
        self._note(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self._note(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self._note(key)
        return super().__contains__(key)


class _VocabularyOnly:
    """A tokenizer that has a vocabulary and nothing else: what a parser asks beyond it raises AttributeError."""

    def __init__(self, vocab):
        self._vocab = vocab

    def get_vocab(self):
        return self._vocab

    @property
    def vocab(self):
        return self._vocab

    def convert_tokens_to_ids(self, tokens):
        if isinstance(tokens, str):
            return self._vocab.get(tokens)
        return [self._vocab.get(token) for token in tokens]

    def __getattr__(self, name):
        raise AttributeError(f"tokenizer.{name}")


def _builds(cls, present):
    """(None or the error, the tokens looked up) of building ``cls`` against a vocabulary of ``present``."""
    vocab = _Looked(present)
    try:
        cls(_VocabularyOnly(vocab))
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}", vocab.asked
    return None, vocab.asked


def needed_tokens(cls, rounds=6):
    """The tokens ``cls`` refuses to build without, or None when it does not build on a vocabulary alone."""
    present, error = [], None
    for _round in range(rounds):
        error, asked = _builds(cls, present)
        new = [token for token in asked if token not in present]
        if error is None or not new:
            break
        present += new
    if error is not None:
        return None
    return [token for token in present if _builds(cls, [other for other in present if other != token])[0]]


def parser_tokens():
    """``parser_tokens`` of the catalog: what each registered tool-call and reasoning parser needs in a tokenizer."""
    import logging

    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    logging.disable(logging.CRITICAL)  # the parsers log what they miss; the result says it
    try:
        result = {"unprobed": {}}
        for kind, manager, load in (
            ("tool_call_parsers", ToolParserManager, ToolParserManager.get_tool_parser),
            ("reasoning_parsers", ReasoningParserManager, ReasoningParserManager.get_reasoning_parser),
        ):
            needs, unprobed = {}, []
            for name in sorted(manager.list_registered()):
                try:
                    tokens = needed_tokens(load(name))
                except Exception:
                    tokens = None
                if tokens is None:
                    unprobed.append(name)
                elif tokens:
                    needs[name] = tokens
            result[kind] = needs
            result["unprobed"][kind] = unprobed
        return result
    finally:
        logging.disable(logging.NOTSET)


def _nargs(action):
    if action.nargs is None:
        return None
    return action.nargs if isinstance(action.nargs, str) else int(action.nargs)


def describe(parser, version):
    options, positionals = {}, []
    for action in parser._actions:
        if not action.option_strings:
            positionals.append({"dest": action.dest, "nargs": _nargs(action)})
            continue
        takes_value = action.nargs != 0
        json_valued = takes_value and _callable_mentions(action.type, {"loads", "parse_dataclass"})
        json_or_string = takes_value and _callable_mentions(action.type, {"union_dict_and_str"})
        choices = None
        if action.choices is not None:
            choices = sorted(str(c) for c in action.choices if c is not None)
        deprecated = action in getattr(parser, "_deprecated", set())
        kind, optional = value_type(action)
        for option in action.option_strings:
            options[option] = {
                "dest": action.dest,
                "takes_value": bool(takes_value),
                "nargs": _nargs(action),
                "json": bool(json_valued or json_or_string),
                "json_or_string": bool(json_or_string),
                "choices": choices,
                "deprecated": bool(deprecated),
                "type": kind,
                "optional": optional,
            }
    normalisations = {}
    for key, probe in (
        ("underscores", ["--max_model_len", "1024"]),
        ("dotted_json_keys", ["--limit-mm-per-prompt.image", "0"]),
    ):
        try:
            normalisations[key] = _probe(parser, probe)
        except SystemExit:
            normalisations[key] = False
    return {
        "format": 2,
        "vllm_version": version,
        "generated_by": GENERATED_BY,
        "platform": _platform(),
        "prog": parser.prog,
        "allow_abbrev": bool(parser.allow_abbrev),
        "positionals": positionals,
        "options": dict(sorted(options.items())),
        "normalisations": normalisations,
        "registries": registries(),
        "parser_tokens": parser_tokens(),
    }


def _probe(parser, args):
    """Whether vLLM's top-level parse (which normalises argv first) accepts ``args`` for serve."""
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(prog="vllm")
    subparsers = top.add_subparsers(dest="subparser")
    _init_serve(subparsers)
    top.parse_args(["serve", *args])
    del parser
    return True


def _init_serve(subparsers):
    from vllm.entrypoints.cli.serve import ServeSubcommand

    return ServeSubcommand().subparser_init(subparsers)


def build_serve_parser():
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    top = FlexibleArgumentParser(prog="vllm")
    subparsers = top.add_subparsers(dest="subparser")
    return _init_serve(subparsers)


def _platform():
    from vllm.platforms import current_platform

    return current_platform.device_type


def main(argv=None):
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = cli.add_mutually_exclusive_group(required=True)
    where.add_argument("--out-dir", help="write <out-dir>/vllm-<version>.json")
    where.add_argument("--stdout", action="store_true", help="print the catalog as one line of JSON")
    args = cli.parse_args(argv)
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    import vllm

    version = vllm.__version__.split("+", maxsplit=1)[0]
    catalog = describe(build_serve_parser(), version)
    if args.stdout:
        # vLLM and torch log to stdout and stderr while they import: the catalog is the last line
        sys.stdout.write("\n" + json.dumps(catalog, sort_keys=False) + "\n")
        return 0
    os.makedirs(args.out_dir, exist_ok=True)
    path = os.path.join(args.out_dir, f"vllm-{version}.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(catalog, handle, indent=1, sort_keys=False)
        handle.write("\n")
    print(
        f"wrote {path}: {len(catalog['options'])} options of vllm serve {version} "
        f"(allow_abbrev={catalog['allow_abbrev']}, platform {catalog['platform']})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
