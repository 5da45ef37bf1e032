# Copyright: gb10.serving maintainers
# Apache-2.0
"""What the argv's parsers need in the model's tokenizer (issue 16: the plan refuses before a model load what vLLM
refuses at start).

`vllm serve` builds its tool-call and reasoning parsers against the tokenizer once the engine is up, after the
model load, and refuses to start when one lacks its tokens ("--tool-call-parser llama3_json cannot be used with the
tokenizer of ...: Llama3JsonToolParser could not locate the bot token '<|python_tag|>'"). The plan cannot read the
snapshot; it hands each serving node these tokens, and roles/model_weights checks the fetched tokenizer for them.
"""

from __future__ import annotations

from .. import _vllm_catalog

# A tokenizer other than the snapshot's tokenizer.json (a --tokenizer of its own, the Mistral or a custom mode).
_OWN_TOKENIZER_MODES = (None, "", "auto", "hf")


def tokenizer_needs(options, catalog):
    """``[{"option", "parser", "tokens"}]``: each parser of ``options`` with the tokens the catalog says it needs.

    Empty where no parser needs a token, where the catalog does not say (a parser it did not probe, a plugin's name),
    and where vLLM would not read the snapshot's tokenizer.json (``--tokenizer``, a ``--tokenizer-mode`` of its own).
    """
    if not catalog or options.get("tokenizer") or options.get("tokenizer-mode") not in _OWN_TOKENIZER_MODES:
        return []
    needs = []
    for option, kind, enabled_by, plugin in _vllm_catalog.PARSER_OPTIONS:
        name = options.get(option)
        if not isinstance(name, str) or not name or options.get(plugin):
            continue
        if enabled_by and not options.get(enabled_by):
            continue
        tokens = _vllm_catalog.parser_tokens(catalog, kind, name)
        if tokens:
            needs.append({"option": f"--{option}", "parser": name, "tokens": tokens})
    return needs
