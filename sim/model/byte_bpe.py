"""A byte-level BPE tokenizer for the simulation's model, trained deterministically on a fixed text, standard library
only, written as the tokenizer.json that Hugging Face `tokenizers` (and so vLLM) reads.

GPT-2's byte-to-character table, its ByteLevel pre-tokenizer and decoder, a BPE model of 256 byte tokens plus the
merges learned here, and the special tokens as added tokens: the ChatML turn markers and Hermes' <tool_call> pair,
which vLLM's hermes tool-call parser looks up in the vocabulary by name.
"""

from __future__ import annotations

import re
from collections import Counter
from itertools import pairwise

# The text the merges are learned from: the sweep's and the ladder's filler words (plugins/module_utils/_loadgen.py),
# the chat template's words and some plain English, so that common words are one token each as in a real vocabulary.
CORPUS = (
    "red sun cat dog box map pen cup hat key " * 40
    + "the secret code is what answer with the code only summarise the list above in one sentence " * 20
    + "system user assistant tool you may call functions available tools name arguments hello say "
    "the quick brown fox jumps over the lazy dog and then it ran to see what was new on a mat "
    * 10
    + "0 1 2 3 4 5 6 7 8 9 10 100 1000 " * 10
)
# Roughly what GPT-2's pre-tokenizer splits on, in the standard library's regular expressions.
_SPLIT = re.compile(r"'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table: every byte a printable character (what ByteLevel maps bytes to before BPE)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = printable[:], 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {byte: chr(char) for byte, char in zip(printable, chars, strict=True)}


def train(corpus: str, merges: int) -> list[tuple[str, str]]:
    """The first ``merges`` merges of BPE on ``corpus``: the most frequent adjacent pair each time, ties broken by the
    pair itself, so the result is the same on every run."""
    table = bytes_to_unicode()
    words = Counter(tuple(table[b] for b in piece.encode()) for piece in _SPLIT.findall(corpus))
    learned = []
    for _round in range(merges):
        pairs = Counter()
        for word, count in words.items():
            for pair in pairwise(word):
                pairs[pair] += count
        if not pairs:
            break
        best = min(pairs, key=lambda pair: (-pairs[pair], pair))
        learned.append(best)
        merged = Counter()
        for word, count in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(word[i] + word[i + 1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += count
        words = merged
    return learned


def tokenizer_json(vocab_size: int, specials: list[str]) -> dict:
    """tokenizer.json of ``vocab_size`` tokens: 256 bytes, the learned merges, then ``specials`` (added tokens)."""
    table = bytes_to_unicode()
    vocab = {table[byte]: byte for byte in range(256)}
    merges = train(CORPUS, vocab_size - 256 - len(specials))
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    added = []
    for name in specials:
        vocab[name] = len(vocab)
        added.append(
            {
                "id": vocab[name],
                "content": name,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
        )
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [[left, right] for left, right in merges],
        },
    }
