#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: wait for an engine's /health and one generation; stop waiting once its unit shows it will not."""

from __future__ import annotations

DOCUMENTATION = r"""
module: engine_ready
short_description: Wait until a serving engine answers /health and generates, failing at once when its unit gives up
description:
  - Polls O(url) until it answers HTTP 200, then asks O(completions_url) for one real generation (a fixed short prompt,
    C(max_tokens) 1, model O(model)), for at most O(timeout) seconds in all. Ready only when both answered 2xx and the
    completion holds a choice; vLLM's /health answers 200 from its API server while the engine core behind it is
    frozen or dead.
  - Between polls it reads the unit's state (C(systemctl show)). An engine that exits during startup (vLLM refusing
    its configuration after loading the weights) is restarted by systemd's C(Restart=on-failure) and never answers;
    the module fails as soon as the unit was restarted since the wait began, waits for an automatic restart, failed,
    or stopped, with the unit's last journal lines, instead of waiting out the timeout.
  - Read-only.
version_added: 0.1.1
extends_documentation_fragment:
  - gb10.serving.read_only
  - gb10.serving.node
author:
  - gb10.serving maintainers (!UNKNOWN)
options:
  url:
    description: The engine's health URL.
    type: str
    required: true
  completions_url:
    description: The engine's C(/v1/completions) URL.
    type: str
    required: true
  model:
    description: The served model name the completion asks for (the plan's C(model.served_model_name)).
    type: str
    required: true
  api_key:
    description:
      - The site's API key, sent in the completion's C(Authorization) header as a bearer token (vLLM guards every
        C(/v1) route once it has a key). Empty or unset sends no header. Never logged or returned.
    type: str
  generation_timeout:
    description: Seconds one completion may take (the first request after a start is the slowest).
    type: float
    default: 60
  unit:
    description: The systemd unit that runs the engine.
    type: str
    required: true
  timeout:
    description: Seconds to wait for HTTP 200 in all.
    type: int
    default: 1200
  delay:
    description: Seconds between polls.
    type: float
    default: 5
  stop_on_exit:
    description:
      - Fail as soon as the unit shows the engine exited. Set it false where exits are part of the start, such as
        the tensor-parallel engine, which is started beside its Ray head and exits until the workers have
        registered; then only O(timeout) ends the wait.
    type: bool
    default: true
"""

EXAMPLES = r"""
- name: Wait until the engine answers /health and generates
  gb10.serving.engine_ready:
    node: "{{ inventory_hostname }}"
    url: http://10.77.0.11:8000/health
    completions_url: http://10.77.0.11:8000/v1/completions
    model: "{{ gb10_plan.model.served_model_name }}"
    api_key: "{{ gb10_api_key }}"
    unit: gb10-vllm.service
    timeout: 1200
    delay: 5
"""

RETURN = r"""
ready:
  description: Whether the engine answered /health 200 and generated one completion.
  type: bool
  returned: always
waited_s:
  description: Seconds from the first poll to the answer or the failure.
  type: float
  returned: always
polls:
  description: How many times the health URL was asked.
  type: int
  returned: always
generations:
  description: How many completions were asked for (one per poll that found /health at 200).
  type: int
  returned: always
generation:
  description: What the last completion answered (empty when it succeeded or none was asked).
  type: str
  returned: always
unit_state:
  description: The unit's last properties read (ActiveState, SubState, Result, NRestarts, InvocationID, ExecMainStatus).
  type: dict
  returned: always
reason:
  description: Why the wait stopped without an answer (empty when ready).
  type: str
  returned: always
"""

import time
from http.client import HTTPException
from urllib.error import HTTPError

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url

from ansible_collections.gb10.serving.plugins.module_utils import _engine_ready


def _health(url, timeout):
    try:
        with open_url(url, timeout=timeout, validate_certs=False) as answer:
            return answer.status
    except (OSError, HTTPException, ValueError):  # refused, reset, 5xx (HTTPError) or timeout: not up yet
        return None


def _complete(url, model, api_key, timeout):
    """(status or None, body, why there was no answer) of one one-token completion."""
    body, headers = _engine_ready.completion_request(model, api_key)
    try:
        with open_url(url, data=body, headers=headers, method="POST", timeout=timeout, validate_certs=False) as answer:
            return answer.status, answer.read(), ""
    except HTTPError as refused:  # 4xx/5xx: the status is the answer
        return refused.code, b"", ""
    except (OSError, HTTPException, ValueError) as exc:  # refused, reset or timed out
        return None, b"", str(getattr(exc, "reason", exc)) or type(exc).__name__


def _unit(module, unit):
    argv = ["systemctl", "show", "--no-pager", *(f"--property={p}" for p in _engine_ready.PROPERTIES), unit]
    _rc, out, _err = module.run_command(argv)
    return _engine_ready.parse_show(out)


def _journal(module, unit, since):
    argv = ["journalctl", "--no-pager", "-o", "cat", "-u", unit, "--since", f"@{int(since)}", "-n", "40"]
    _rc, out, _err = module.run_command(argv)
    return [line for line in out.splitlines() if line.strip()]


def main():
    module = AnsibleModule(
        argument_spec={
            "node": {"type": "str", "required": True},
            "url": {"type": "str", "required": True},
            "completions_url": {"type": "str", "required": True},
            "model": {"type": "str", "required": True},
            "api_key": {"type": "str", "no_log": True},
            "generation_timeout": {"type": "float", "default": 60},
            "unit": {"type": "str", "required": True},
            "timeout": {"type": "int", "default": 1200},
            "delay": {"type": "float", "default": 5},
            "stop_on_exit": {"type": "bool", "default": True},
        },
        supports_check_mode=True,
    )
    p = module.params
    started, wall = time.monotonic(), time.time()
    first = _unit(module, p["unit"])
    polls, generations, generation, state, reason = 0, 0, "", first, ""
    while True:
        polls += 1
        if _health(p["url"], timeout=max(1.0, min(10.0, p["delay"] * 2))) == 200:
            generations += 1
            asked = time.monotonic()
            status, body, why = _complete(p["completions_url"], p["model"], p["api_key"], p["generation_timeout"])
            generation = _engine_ready.judge_completion(status, body) or ""
            if status is None:
                generation = f"no answer ({why}; the limit is {p['generation_timeout']:g} s)"
            if not generation:
                module.exit_json(
                    changed=False,
                    ready=True,
                    waited_s=round(time.monotonic() - started, 1),
                    polls=polls,
                    generations=generations,
                    generation="",
                    unit_state=state,
                    reason="",
                )
            generation += f" after {time.monotonic() - asked:.1f} s"
        else:
            generation = ""
        state = _unit(module, p["unit"])
        reason = (_engine_ready.judge(p["unit"], first, state) or "") if p["stop_on_exit"] else ""
        waited = time.monotonic() - started
        if not reason and waited >= p["timeout"]:
            reason = f"no answer within the timeout of {p['timeout']} s while {p['unit']} is {state.get('SubState')}"
            if generation:
                reason += f"; the last completion of {generations}: {generation}"
        if reason:
            journal = _journal(module, p["unit"], wall)
            generated_nothing = p["completions_url"] if generation else None
            module.fail_json(
                msg=_engine_ready.message(p["node"], p["unit"], p["url"], waited, reason, journal, generated_nothing),
                ready=False,
                waited_s=round(waited, 1),
                polls=polls,
                generations=generations,
                generation=generation,
                unit_state=state,
                reason=reason,
            )
        time.sleep(p["delay"])


if __name__ == "__main__":
    main()
