# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Tool-calling evaluation: score OpenAI chat responses against expected calls, gate a model on the score.

Pure functions over plain data. A response is either a chat.completion (dict or JSON text) or the text of an
SSE stream of chat.completion.chunk events, whose tool-call arguments arrive in fragments keyed by the call's
``index`` (see the vLLM fixtures). A case passes when the response is the right, well-formed call(s): each
call's name matches, its arguments parse as a JSON object and equal (or contain) the expected ones, parallel
calls compare as a multiset (order free), and a case that needs no call gets no ``tool_calls`` at all.

The reasoning check follows seed 004's open defect: a reasoning parser is judged by whether the reasoning field
(``reasoning``; ``reasoning_content`` before vLLM renamed it) holds the text before the end-of-thinking marker,
never by whether ``content`` looks clean, which it always does.
"""

from __future__ import annotations

import json
import re

KINDS = ("single", "parallel", "none", "nested")
MATCHES = ("exact", "contains")
# A case's tool_choice (OpenAI's): auto by default, what a real model is judged on; required, or a named function,
# make the server's structured output produce a call (for a model that calls no tool by itself, a random one).
TOOL_CHOICES = ("auto", "required", "none")
DEFAULT_END_MARKER = "</think>"

# "data: {...}" at the end of a line; tolerant of a prefix before it (a client's trace log wraps each read).
_SSE_RE = re.compile(r"data:\s*(\{.*\}|\[DONE\])\s*$")


class CaseError(ValueError):
    """The evaluation set is malformed (the operator's file, not the model, is wrong)."""


def validate_cases(cases):
    """Check the evaluation set's shape; return it as a list. Raises CaseError listing every problem."""
    problems = []
    if not isinstance(cases, list) or not cases:
        raise CaseError("the evaluation set must be a non-empty list of cases")
    seen = set()
    for n, case in enumerate(cases):
        where = f"case #{n}"
        if not isinstance(case, dict):
            problems.append(f"{where} is not a mapping")
            continue
        cid = case.get("id")
        where = f"case {cid!r}" if cid else where
        if not cid or not isinstance(cid, str):
            problems.append(f"{where}: id must be a non-empty string")
        elif cid in seen:
            problems.append(f"{where}: id is used twice")
        seen.add(cid)
        if case.get("kind") not in KINDS:
            problems.append(f"{where}: kind must be one of {', '.join(KINDS)}")
        if not isinstance(case.get("messages"), list) or not case.get("messages"):
            problems.append(f"{where}: messages must be a non-empty list")
        tools = case.get("tools")
        if not isinstance(tools, list) or not tools:
            problems.append(f"{where}: tools must be a non-empty list")
            tools = []
        names = {((t or {}).get("function") or {}).get("name") for t in tools}
        choice = case.get("tool_choice", "auto")
        if isinstance(choice, dict):
            held = choice.get("type") == "function" and (choice.get("function") or {}).get("name") in names
        else:
            held = choice in TOOL_CHOICES
        if not held:
            problems.append(
                f"{where}: tool_choice must be one of {', '.join(TOOL_CHOICES)} or "
                "{type: function, function: {name: <a tool of the case>}}"
            )
        expect = case.get("expect_calls")
        if not isinstance(expect, list):
            problems.append(f"{where}: expect_calls must be a list (empty for a case that needs no call)")
            continue
        if case.get("kind") == "none" and expect:
            problems.append(f"{where}: kind none expects no calls")
        if case.get("kind") == "parallel" and len(expect) < 2:
            problems.append(f"{where}: kind parallel expects at least two calls")
        if case.get("kind") in ("single", "nested") and len(expect) != 1:
            problems.append(f"{where}: kind {case.get('kind')} expects exactly one call")
        for call in expect:
            if not isinstance(call, dict) or call.get("name") not in names:
                problems.append(f"{where}: expected call {call!r} names no tool of the case")
            elif not isinstance(call.get("arguments", {}), dict):
                problems.append(f"{where}: expected arguments of {call['name']} must be a mapping")
            elif call.get("match", "exact") not in MATCHES:
                problems.append(f"{where}: match must be one of {', '.join(MATCHES)}")
    if problems:
        raise CaseError("; ".join(problems))
    return cases


def request_body(case, model, stream=False, max_tokens=512):
    """The /v1/chat/completions body for a case (its tool_choice; auto by default: the model decides)."""
    body = {
        "model": model,
        "messages": case["messages"],
        "tools": case["tools"],
        "tool_choice": case.get("tool_choice", "auto"),
        "temperature": 0,
        "max_tokens": max_tokens,
    }
    if stream:
        body["stream"] = True
    return body


def reassemble_stream(text):
    """Rebuild the assistant message of an SSE stream of chat.completion.chunk events.

    Returns ``{"message": {...}, "finish_reason": str|None}``; tool-call fragments are joined per ``index``.
    Raises ValueError when the text holds no chunk at all.
    """
    content, reasoning, calls, finish, chunks = [], [], {}, None, 0
    for line in str(text).splitlines():
        match = _SSE_RE.search(line.strip())
        if not match or match.group(1) == "[DONE]":
            continue
        chunk = json.loads(match.group(1))
        chunks += 1
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("content"):
                content.append(delta["content"])
            piece = delta.get("reasoning") or delta.get("reasoning_content")
            if piece:
                reasoning.append(piece)
            for frag in delta.get("tool_calls") or []:
                slot = calls.setdefault(
                    frag.get("index", len(calls)), {"id": None, "type": "function", "name": [], "arguments": []}
                )
                slot["id"] = frag.get("id") or slot["id"]
                function = frag.get("function") or {}
                if function.get("name"):
                    slot["name"].append(function["name"])
                if function.get("arguments"):
                    slot["arguments"].append(function["arguments"])
            finish = choice.get("finish_reason") or finish
    if not chunks:
        raise ValueError("no chat.completion.chunk event in the stream")
    tool_calls = [
        {
            "id": slot["id"],
            "type": slot["type"],
            "function": {"name": "".join(slot["name"]), "arguments": "".join(slot["arguments"])},
        }
        for _index, slot in sorted(calls.items())
    ]
    message = {
        "role": "assistant",
        "content": "".join(content) or None,
        "reasoning": "".join(reasoning) or None,
        "tool_calls": tool_calls,
    }
    return {"message": message, "finish_reason": finish}


def response_message(response):
    """The assistant message of a response: a chat.completion dict, its JSON text, or an SSE stream's text."""
    if isinstance(response, (str, bytes)):
        text = response.decode() if isinstance(response, bytes) else response
        stripped = text.strip()
        if stripped.startswith("{"):
            response = json.loads(stripped)
        else:
            return reassemble_stream(text)["message"]
    if not isinstance(response, dict):
        raise ValueError(f"a response must be a chat.completion or an SSE stream, got {type(response).__name__}")
    if "error" in response and "choices" not in response:
        raise ValueError(f"the server answered an error: {response['error']}")
    choices = response.get("choices") or []
    if not choices:
        raise ValueError("the response has no choices")
    return choices[0].get("message") or {}


def _contains(actual, expected):
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and _contains(actual[k], v) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) == len(expected) and all(map(_contains, actual, expected))
    return actual == expected


def _parse_calls(message):
    """[(name, arguments dict)] and a list of why a call is malformed."""
    parsed, problems = [], []
    for n, call in enumerate(message.get("tool_calls") or []):
        function = (call or {}).get("function") or {}
        name = function.get("name")
        raw = function.get("arguments")
        if not name:
            problems.append(f"call {n} has no function name")
            continue
        try:
            args = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError as exc:
            problems.append(f"call {n} ({name}): arguments are not JSON ({exc}): {str(raw)[:120]!r}")
            continue
        if not isinstance(args, dict):
            problems.append(f"call {n} ({name}): arguments are not a JSON object: {str(raw)[:120]!r}")
            continue
        parsed.append((name, args))
    return parsed, problems


def _fits(actual, want):
    name, args = actual
    if name != want["name"]:
        return False
    expected = want.get("arguments", {})
    return _contains(args, expected) if want.get("match", "exact") == "contains" else args == expected


def _match_all(actual, wanted):
    """True when the actual calls pair one-to-one with the wanted ones (order free; backtracking, n is tiny)."""
    if not wanted:
        return not actual
    first, rest = wanted[0], wanted[1:]
    return any(_fits(call, first) and _match_all(actual[:i] + actual[i + 1 :], rest) for i, call in enumerate(actual))


def score_case(case, response):
    """{"id", "passed", "reason"} for one case; any response error is a failure with its reason."""
    try:
        message = response_message(response)
    except (ValueError, TypeError) as exc:
        return {"id": case["id"], "passed": False, "reason": f"no usable response: {exc}"}
    calls, problems = _parse_calls(message)
    wanted = case["expect_calls"]
    if problems:
        return {"id": case["id"], "passed": False, "reason": "malformed tool call: " + "; ".join(problems)}
    if not wanted:
        if calls:
            return {"id": case["id"], "passed": False, "reason": f"no call needed, got {[c[0] for c in calls]}"}
        return {"id": case["id"], "passed": True, "reason": "answered without a call"}
    if _match_all(calls, wanted):
        return {"id": case["id"], "passed": True, "reason": f"{len(wanted)} call(s) as expected"}
    got = [f"{n}({json.dumps(a, sort_keys=True)})" for n, a in calls] or "no call"
    want = [f"{w['name']}({json.dumps(w.get('arguments', {}), sort_keys=True)})" for w in wanted]
    return {"id": case["id"], "passed": False, "reason": f"expected {want}, got {got}"}


def score(cases, responses):
    """Score the whole set. ``responses`` maps case id to its response; a missing one fails its case."""
    results = [score_case(c, responses.get(c["id"], "")) for c in cases]
    passed = sum(1 for r in results if r["passed"])
    return {
        "score": round(passed / len(results), 4) if results else 0.0,
        "passed": passed,
        "total": len(results),
        "failing": [r for r in results if not r["passed"]],
        "results": results,
    }


def gate(candidate, threshold, running=None, margin=0.05):
    """Refuse a candidate scoring below ``threshold`` or below ``running`` by more than ``margin``.

    ``candidate`` and ``running`` are outputs of score() (``running`` may be None: nothing runs yet).
    Returns {"ok", "msg", "candidate_score", "running_score"}.
    """
    cand = candidate["score"]
    run = running["score"] if running else None
    reasons = []
    if cand < threshold:
        reasons.append(f"score {cand:.2f} is below the threshold {threshold:.2f}")
    if run is not None and cand < run - margin:
        reasons.append(f"score {cand:.2f} is below the running model's {run:.2f} by more than {margin:.2f}")
    both = f"candidate {cand:.2f} ({candidate['passed']}/{candidate['total']})" + (
        f", running {run:.2f} ({running['passed']}/{running['total']})" if running else ", nothing running to compare"
    )
    if reasons:
        failing = "; ".join(f"{f['id']}: {f['reason']}" for f in candidate["failing"])
        msg = f"tool-calling gate refused: {' and '.join(reasons)} [{both}]. Failing cases: {failing}"
    else:
        msg = f"tool-calling gate passed [{both}], threshold {threshold:.2f}, margin {margin:.2f}"
    return {"ok": not reasons, "msg": msg, "candidate_score": cand, "running_score": run}


def reasoning_check(response, raw_generation=None, end_marker=DEFAULT_END_MARKER):
    """Judge a reasoning parser by its reasoning field, never by clean content (seed 004's open defect).

    ``raw_generation`` is the same prompt's raw text (e.g. from /v1/completions with the rendered prompt), when
    available: then the reasoning must hold the text before ``end_marker``. Returns {"ok", "warning"}.
    """
    message = response_message(response)
    reasoning = message.get("reasoning") or message.get("reasoning_content") or ""
    content = message.get("content") or ""
    why = (
        "A reasoning parser is judged by whether the reasoning field (reasoning, formerly reasoning_content) holds "
        f"the text before {end_marker} in the raw generation, not by whether content looks clean: with the "
        "parser's initial state set to reasoning, content stays clean even when the chain of thought is discarded "
        "(seed 004, open defect). Serving still works; the chain of thought is lost. To get it, call "
        "/v1/completions with the rendered prompt."
    )
    if not reasoning.strip():
        return {
            "ok": False,
            "warning": f"reasoning parser surfaced no reasoning (content clean: {bool(content)}). {why}",
        }
    if end_marker and end_marker in content:
        return {"ok": False, "warning": f"content holds {end_marker}: the parser did not split the output. {why}"}
    if raw_generation is not None:
        before = str(raw_generation).split(end_marker, 1)[0] if end_marker in str(raw_generation) else None
        if before is None:
            return {"ok": False, "warning": f"the raw generation holds no {end_marker}; nothing to compare. {why}"}
        start = end_marker.replace("</", "<", 1)
        expected = " ".join(before.replace(start, "", 1).split())
        if " ".join(reasoning.split()) != expected:
            return {"ok": False, "warning": f"reasoning differs from the text before {end_marker}. {why}"}
    return {"ok": True, "warning": ""}


# What the gate reads of an ansible.builtin.uri result. A registered result also holds the request's invocation,
# its Authorization header too: passed whole to the gate module, the site's API key reached the task's output and
# the node's journal (the module's "Invoked with" line) although the uri task itself ran with no_log.
ANSWER_KEYS = ("json", "content", "msg", "status", "skipped")


def answer_of(result):
    """One uri result reduced to what an answer is: its body, status and message (never the request)."""
    result = result if isinstance(result, dict) else {}
    return {key: result[key] for key in ANSWER_KEYS if key in result}


def answers_of(results):
    """A uri loop's results reduced to their answers, each keeping the case's id as ``item.id``."""
    return [{**answer_of(r), "item": {"id": ((r or {}).get("item") or {}).get("id")}} for r in results or []]
