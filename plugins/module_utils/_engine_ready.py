# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Waiting for an engine's /health after a (re)start, and knowing when to stop waiting.

An engine that refuses its configuration at startup (vLLM's "To serve at least one request with the model's max
seq len ..." after the weights are loaded) exits, and systemd's Restart=on-failure starts it again: /health never
answers, and a plain poll waits out the whole timeout (20 minutes by default) for each refusal. The unit's own state
says it at once: a restart since the wait began, an auto-restart pending, or a failed unit. Pure functions over
``systemctl show`` output, so they are tested without systemd.

/health alone is not "ready" (issue 19): vLLM's API server answers it 200 while the engine core behind it is frozen
or dead, so the wait also asks for one real generation (POST /v1/completions, max_tokens 1) and needs a choice back.
"""

from __future__ import annotations

import json

PROPERTIES = ("ActiveState", "SubState", "Result", "NRestarts", "InvocationID", "ExecMainStatus")


# Short and fixed, as the watchdog's: one token proves that the engine core generates.
PROMPT = "Hello"


def completion_request(model, api_key=None):
    """(body bytes, headers) of the one-token completion; the key only ever goes into the Authorization header."""
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return json.dumps({"model": model, "prompt": PROMPT, "max_tokens": 1}).encode(), headers


def judge_completion(status, body):
    """None when the completion answered 2xx with at least one choice, else what it answered."""
    if status is None:
        return "no answer"
    if not 200 <= status < 300:
        hint = " (the API key is missing or wrong)" if status == 401 else ""
        return f"HTTP {status}{hint}"
    try:
        choices = json.loads(body or b"null").get("choices")
    except (ValueError, AttributeError):
        return f"HTTP {status} with a body that is no JSON object"
    if not isinstance(choices, list) or not choices:
        return f"HTTP {status} without a choice"
    return None


def parse_show(text):
    """{property: value} from ``systemctl show -p ...`` output (KEY=VALUE lines)."""
    props = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            props[key.strip()] = value.strip()
    return props


def _restarts(props):
    try:
        return int(props.get("NRestarts") or 0)
    except ValueError:
        return 0


def judge(unit, first, now):
    """None while the engine may still come up, else why it will not: the unit's state since the wait began.

    first: the unit's properties when the wait began; now: its properties at this sample.
    """
    active, sub = now.get("ActiveState", ""), now.get("SubState", "")
    status = now.get("ExecMainStatus") or "?"
    result = now.get("Result") or "?"
    restarted = _restarts(now) - _restarts(first)
    if restarted > 0:
        return (
            f"{unit} exited and systemd restarted it {restarted} time(s) since the wait began "
            f"(last exit status {status}, result {result}): the engine stopped during startup"
        )
    if sub == "auto-restart":
        return f"{unit} exited (status {status}, result {result}) and waits for systemd's automatic restart"
    if active == "failed":
        return f"{unit} failed (status {status}, result {result})"
    if active == "inactive" and sub == "dead":
        return f"{unit} is not running (stopped, result {result})"
    if first.get("InvocationID") and now.get("InvocationID") and first["InvocationID"] != now["InvocationID"]:
        return f"{unit} was started again by someone else since the wait began"
    return None


def message(node, unit, url, waited_s, reason, journal_lines, completions_url=None):
    """The operator's message for an engine that will not answer.

    completions_url: set when /health did answer 200 and the generation there is what never succeeded."""
    words = "\n".join(journal_lines[-20:]) if journal_lines else "(no journal lines since the start)"
    what = (
        f"{url} answered 200 but {completions_url} generated nothing"
        if completions_url
        else f"{url} did not answer 200"
    )
    return (
        f"{node}: {what} after {waited_s:.0f} s and will not: {reason}. "
        f"The engine's last words ({unit}, journalctl -u {unit}):\n{words}\n"
        "Fix what it says (a refused setting in the plan's argv, memory, the image), then apply again."
    )
