"""Long-context recall: the answer to "What is the X?" when the prompt states "The X is Y." anywhere in it.

A needle-in-a-haystack request (the context ladder's) is answered from the whole prompt, however long, as a model
that holds its context would answer it; a prompt without such a statement gets the stand-in's ordinary text.
"""

from __future__ import annotations

import re

_QUESTION = re.compile(r"what is the ([\w -]{1,60}?)\s*\?", re.I)


def _text(messages):
    parts = []
    for message in messages or []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        parts.append(str(content or ""))
    return "\n".join(parts)


def answer(messages):
    """The recalled value, or None when the last question asks for nothing the prompt states."""
    text = _text(messages)
    questions = _QUESTION.findall(text)
    if not questions:
        return None
    subject = questions[-1].strip()
    stated = re.search(r"\bthe " + re.escape(subject) + r" is ([^\s?]+?)[.,;]?(?:\s|$)", text, re.I)
    return stated.group(1) if stated else None
