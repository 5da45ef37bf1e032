"""The catalog generator's needed_tokens: the tokens a parser's constructor refuses to build without, measured.

The parsers here are written the ways vLLM 0.32's are: a token looked up in get_vocab() whose absence raises
(Llama3JsonToolParser's bot token), one looked up and only used when there (optional), a pair checked together
(DeepSeek's start/end), and a constructor that needs the tokenizer's encode (plamo3's), which a vocabulary alone
cannot build: unprobed (None).
"""

from __future__ import annotations

from pathlib import Path

from source_loader import load

SCRIPT = Path(__file__).resolve().parents[5] / "roles" / "serving_image" / "files" / "vllm_catalog_generate.py"
generate = load("vllm_catalog_generate", SCRIPT)


class BotToken:
    def __init__(self, tokenizer):
        vocab = tokenizer.get_vocab()
        self.optional = vocab.get("<|eom_id|>")
        if vocab.get("<|python_tag|>") is None:
            raise RuntimeError("could not locate the bot token '<|python_tag|>' in the tokenizer")


class StartEnd:
    def __init__(self, tokenizer):
        start, end = tokenizer.vocab.get("<calls>"), tokenizer.vocab.get("</calls>")
        if start is None or end is None:
            raise RuntimeError("could not locate tool call start/end tokens in the tokenizer!")


class NeedsNothing:
    def __init__(self, tokenizer):
        self.start = tokenizer.convert_tokens_to_ids("<tool_call>")


class NeedsEncode:
    def __init__(self, tokenizer):
        self.ids = tokenizer.encode("<tag>")


def test_the_token_whose_absence_raises_is_needed_and_the_optional_one_is_not():
    assert generate.needed_tokens(BotToken) == ["<|python_tag|>"]


def test_both_tokens_of_a_pair_are_needed():
    assert generate.needed_tokens(StartEnd) == ["<calls>", "</calls>"]


def test_a_parser_that_looks_up_without_refusing_needs_nothing():
    assert generate.needed_tokens(NeedsNothing) == []


def test_a_parser_that_needs_more_than_a_vocabulary_is_unprobed():
    assert generate.needed_tokens(NeedsEncode) is None
