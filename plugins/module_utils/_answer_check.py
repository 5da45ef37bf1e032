# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The rolling upgrade's answer check, as pure functions (roles/upgrade_node, tasks/answers.yml applies them).

Before a candidate replica goes back into the proxy it answers a fixed set of greedy prompts (temperature 0, a few
tokens: the plan's ``answer_check``), and its answers are compared token by token with those of a replica still
serving. A new image can serve wrong numbers and fail nothing else (seed 004: FlashInfer 0.6.17 gave NaN at batch
64-256); pulsar-gb10-vllm-stack promotes a pin only after such a comparison.

- request(): one prompt's chat request (temperature 0, max_tokens, vLLM's ``return_token_ids`` so that the answers
  compare as token ids where the engine gives them);
- answer(): the compared part of one response (its token ids, its text, its finish reason), or its error;
- reference(): what the candidate is compared with: the serving replica where both load the same model (vLLM's
  /v1/models ``root``, the snapshot path, which names the revision), else answers recorded for the candidate's
  model in this run, else nothing (skipped, with the reason);
- verdict(): the comparison, prompt by prompt, against the tolerance (how many prompts may differ).
"""

from __future__ import annotations

import hashlib
import json

# The default set where a profile names none: short, factual, with one obvious greedy continuation for a real model
# (any deterministic continuation serves: the check compares two engines, it does not grade them).
DEFAULT_PROMPTS = (
    "What is the capital of France? Answer in one word.",
    "Count from one to five, separated by commas.",
    "Complete the sentence: The quick brown fox",
    "What is 12 times 12? Answer with the number only.",
)
DEFAULT_MAX_TOKENS = 8
DEFAULT_TOLERANCE = 0
SHOWN = 200


def settings(profile_value):
    """The check's settings from a profile's ``answer_check`` (None: the defaults): {"enabled", "prompts",
    "max_tokens", "tolerance"}. Raises ValueError naming what is wrong (the plan's rule turns it into a violation)."""
    given = {} if profile_value is None else profile_value
    if not isinstance(given, dict):
        raise ValueError(f"answer_check must be a mapping (enabled, prompts, max_tokens, tolerance), not {given!r}")
    unknown = sorted(set(given) - {"enabled", "prompts", "max_tokens", "tolerance"})
    if unknown:
        raise ValueError(
            f"answer_check has unknown key(s) {', '.join(unknown)}: it knows enabled, prompts, max_tokens and tolerance"
        )
    enabled = given.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ValueError(f"answer_check.enabled is {enabled!r}: true or false")
    prompts = given.get("prompts", list(DEFAULT_PROMPTS))
    if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) and p.strip() for p in prompts):
        raise ValueError(f"answer_check.prompts is {prompts!r}: a non-empty list of non-empty strings")
    if len(set(prompts)) != len(prompts):
        raise ValueError("answer_check.prompts holds a prompt twice: each is compared once")
    max_tokens = given.get("max_tokens", DEFAULT_MAX_TOKENS)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 1 <= max_tokens <= 256:
        raise ValueError(
            f"answer_check.max_tokens is {max_tokens!r}: an integer from 1 to 256 (a few tokens: greedy answers of "
            "two builds drift apart the longer they run)"
        )
    tolerance = given.get("tolerance", DEFAULT_TOLERANCE)
    if isinstance(tolerance, bool) or not isinstance(tolerance, int) or not 0 <= tolerance < len(prompts):
        raise ValueError(
            f"answer_check.tolerance is {tolerance!r}: how many of the {len(prompts)} prompts may answer differently, "
            f"an integer from 0 to {len(prompts) - 1}"
        )
    return {"enabled": enabled, "prompts": list(prompts), "max_tokens": max_tokens, "tolerance": tolerance}


def request(model, prompt, max_tokens):
    """One greedy chat request: temperature 0, ``max_tokens``, the token ids asked for (vLLM's return_token_ids)."""
    return {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "temperature": 0,
        "max_tokens": int(max_tokens),
        "stream": False,
        "return_token_ids": True,
    }


def answer(status, body):
    """The compared part of one response: {"tokens" (token ids or None), "text", "finish", "error" (or None)}."""
    if status != 200 or not isinstance(body, dict):
        shown = json.dumps(body)[:SHOWN] if body is not None else ""
        return {"tokens": None, "text": None, "finish": None, "error": f"status {status} {shown}".strip()}
    try:
        choice = body["choices"][0]
    except (KeyError, IndexError, TypeError):
        return {"tokens": None, "text": None, "finish": None, "error": "no choices in the answer"}
    message = choice.get("message") or {}
    tokens = choice.get("token_ids")
    return {
        "tokens": [int(t) for t in tokens] if isinstance(tokens, list) else None,
        "text": message.get("content") if isinstance(message.get("content"), str) else "",
        "finish": choice.get("finish_reason"),
        "error": None,
    }


def record_key(root, settings_value):
    """What recorded answers are kept under: the model the candidate loads and the prompts and length asked."""
    text = json.dumps(
        {"root": root, "prompts": settings_value["prompts"], "max_tokens": settings_value["max_tokens"]},
        sort_keys=True,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def reference(candidate_root, serving, serving_root, recorded):
    """What the candidate's answers are compared with: {"kind": "serving"|"recorded"|"skip", "reason"}.

    ``serving`` is the replica still serving (or None), ``serving_root`` the model it loads (its /v1/models root,
    the snapshot path), ``recorded`` whether answers of the candidate's model were recorded in this run."""
    if serving and serving_root and candidate_root and serving_root == candidate_root:
        return {"kind": "serving", "reason": f"{serving} serves the same model ({candidate_root})"}
    if recorded:
        return {
            "kind": "recorded",
            "reason": f"the model changed ({serving_root or 'unknown'} -> {candidate_root}): compared with the "
            "answers recorded for it earlier in this run",
        }
    if not serving:
        why = "no other replica serves to compare with"
    elif not candidate_root or not serving_root:
        why = f"the model could not be read from /v1/models (candidate {candidate_root!r}, {serving} {serving_root!r})"
    else:
        why = (
            f"the model changed ({serving} loads {serving_root}, the candidate {candidate_root}) and no answers of "
            "the new one are recorded yet (the first node on a new revision records them; the next ones compare)"
        )
    return {"kind": "skip", "reason": f"answer check skipped: {why}"}


def _first_difference(one, other):
    for index, (a, b) in enumerate(zip(one, other, strict=False)):
        if a != b:
            return index
    return None if len(one) == len(other) else min(len(one), len(other))


def _shown(entry):
    if entry["error"]:
        return f"error: {entry['error']}"
    return json.dumps(entry["text"] if len(entry["text"] or "") <= SHOWN else entry["text"][:SHOWN] + "...")


def verdict(prompts, candidate, reference_answers, tolerance, candidate_name, reference_name):
    """Compare ``candidate`` with ``reference_answers`` (answer() entries, one per prompt, in ``prompts``' order).

    Token by token: the token ids where both give them, else the text character by character. A prompt differs
    where the tokens or the finish reason differ, or either side failed. Refused when more prompts differ than
    ``tolerance``; the message gives each differing prompt, where it diverges and both answers."""
    if len(candidate) != len(prompts) or len(reference_answers) != len(prompts):
        raise ValueError(
            f"{len(prompts)} prompts but {len(candidate)} candidate and {len(reference_answers)} reference answers"
        )
    differing = []
    for prompt, mine, theirs in zip(prompts, candidate, reference_answers, strict=True):
        if mine["error"] or theirs["error"]:
            differing.append({"prompt": prompt, "at": None, "candidate": mine, "reference": theirs})
            continue
        by_tokens = mine["tokens"] is not None and theirs["tokens"] is not None
        one, other = (mine["tokens"], theirs["tokens"]) if by_tokens else (mine["text"], theirs["text"])
        at = _first_difference(one, other)
        if at is not None or mine["finish"] != theirs["finish"]:
            differing.append(
                {
                    "prompt": prompt,
                    "at": at,
                    "unit": "token" if by_tokens else "character",
                    "candidate": mine,
                    "reference": theirs,
                }
            )
    ok = len(differing) <= tolerance
    head = (
        f"{candidate_name} answered {len(prompts) - len(differing)} of {len(prompts)} greedy prompts as "
        f"{reference_name} did ({len(differing)} differ, tolerance {tolerance})"
    )
    details = "; ".join(
        f"prompt {d['prompt']!r}: "
        + (f"first difference at {d.get('unit', 'token')} {d['at']}, " if d["at"] is not None else "")
        + f"{candidate_name} answered {_shown(d['candidate'])}, {reference_name} answered {_shown(d['reference'])}"
        for d in differing
    )
    msg = head + (f": {details}" if details else "")
    return {"ok": ok, "msg": msg, "differing": differing, "compared": len(prompts)}
