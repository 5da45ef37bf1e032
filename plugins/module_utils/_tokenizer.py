# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The tokens of a Hugging Face snapshot's tokenizer, and which of the tokens a parser needs it lacks.

vLLM builds its parsers against ``tokenizer.get_vocab()``: for a tokenizers-library tokenizer that is the model's
vocabulary (tokenizer.json's ``model.vocab``: a {token: id} map for BPE, WordPiece and WordLevel, a [[token, score],
...] list for Unigram) with the added tokens (``added_tokens`` there, ``added_tokens_decoder`` of
tokenizer_config.json). A snapshot without tokenizer.json (a sentencepiece or tiktoken tokenizer, or a Mistral one:
tekken.json, which vLLM's auto mode prefers) is not read here: its tokens are not checked.
"""

from __future__ import annotations

import json
import os

TOKENIZER_JSON = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
# Files that make vLLM load another tokenizer than tokenizer.json (vllm/tokenizers: the Mistral tokenizer).
OTHER_TOKENIZERS = ("tekken.json",)


def vocabulary(tokenizer, config=None):
    """The set of tokens of a parsed tokenizer.json (``tokenizer``) and tokenizer_config.json (``config``)."""
    tokens = set()
    vocab = (tokenizer.get("model") or {}).get("vocab") if isinstance(tokenizer, dict) else None
    if isinstance(vocab, dict):
        tokens.update(key for key in vocab if isinstance(key, str))
    elif isinstance(vocab, list):
        tokens.update(entry[0] for entry in vocab if isinstance(entry, list) and entry and isinstance(entry[0], str))
    for added in (tokenizer.get("added_tokens") if isinstance(tokenizer, dict) else None) or ():
        if isinstance(added, dict) and isinstance(added.get("content"), str):
            tokens.add(added["content"])
    decoder = config.get("added_tokens_decoder") if isinstance(config, dict) else None
    for added in (decoder or {}).values():
        if isinstance(added, dict) and isinstance(added.get("content"), str):
            tokens.add(added["content"])
    return tokens


def missing(needs, tokens):
    """The entries of ``needs`` ([{"option", "parser", "tokens"}]) whose tokens ``tokens`` lacks, with only those."""
    short = []
    for need in needs:
        lacking = [token for token in need["tokens"] if token not in tokens]
        if lacking:
            short.append({"option": need["option"], "parser": need["parser"], "tokens": lacking})
    return short


def describe(node, snapshot, short):
    """The operator's message for the parsers whose tokens the snapshot's tokenizer lacks."""
    parts = [f"{need['option']} {need['parser']} needs {', '.join(map(repr, need['tokens']))}" for need in short]
    return (
        f"{node}: {'; '.join(parts)}, which the model's tokenizer ({os.path.join(snapshot, TOKENIZER_JSON)}) lacks: "
        'vLLM would load the model and then refuse to start ("cannot be used with the tokenizer of ..."). Set the '
        "profile's vllm_options to this model's parsers (its model card names them). Nothing was started"
    )


def read(snapshot):
    """``(tokens or None, what was read or why not)`` of the snapshot folder's tokenizer."""
    for name in OTHER_TOKENIZERS:
        if os.path.exists(os.path.join(snapshot, name)):
            return None, f"{name} is there: vLLM may load that tokenizer instead of {TOKENIZER_JSON}"
    path = os.path.join(snapshot, TOKENIZER_JSON)
    if not os.path.isfile(path):
        return None, f"{path} does not exist (a tokenizer of another kind)"
    try:
        with open(path, encoding="utf-8") as handle:
            tokenizer = json.load(handle)
    except (OSError, ValueError) as exc:
        return None, f"{path} is not readable JSON ({exc})"
    config = None
    config_path = os.path.join(snapshot, TOKENIZER_CONFIG)
    if os.path.isfile(config_path):
        try:
            with open(config_path, encoding="utf-8") as handle:
                config = json.load(handle)
        except (OSError, ValueError):
            config = None  # added_tokens_decoder only adds to what tokenizer.json holds
    return vocabulary(tokenizer, config), path
