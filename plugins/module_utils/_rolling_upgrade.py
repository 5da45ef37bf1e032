# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The rolling upgrade's decisions, as pure functions (playbooks/rolling_upgrade.yml applies them).

- in_flight(): requests a replica still runs or queues, from its OWN /metrics (seed 002: metrics read through the
  proxy jump between replicas), with prometheus_client's parser;
- smoke_request() / smoke_verdict(): the tool-call smoke test: one chat request with one tool must come back as a
  well-formed call of that tool whose arguments parse as a JSON object. A call left as raw text in ``content`` is
  what vLLM returns when --tool-call-parser does not read the model's format, and is named as such;
- warmup_verdict(): the first request after a start (never measured: seed 004) must be a chat completion;
- node_drift(): what differs between the running serving container and the target (image, argv, environment):
  a node with no drift that is READY in the proxy is already upgraded and is skipped, so a stopped upgrade resumes
  by running the same command again;
- failure_message(), node_timings(): what the operator reads when a node fails, and the bench's figures.
"""

from __future__ import annotations

import json

from ansible_collections.gb10.serving.plugins.module_utils import _toolcall_eval, _units

IN_FLIGHT_METRICS = ("vllm:num_requests_running", "vllm:num_requests_waiting")
SMOKE_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
        },
    },
}
SMOKE_PROMPT = "What is the weather in Helsinki right now? Use the tool."


def in_flight(metrics_text):
    """{"running", "waiting", "total"} summed over every sample of vLLM's two gauges (one per engine/model label).

    Raises ValueError when the text holds neither gauge: an endpoint that is not vLLM's must not read as idle.
    """
    from prometheus_client.parser import text_string_to_metric_families

    found = {name: 0.0 for name in IN_FLIGHT_METRICS}
    seen = set()
    for family in text_string_to_metric_families(str(metrics_text)):
        for sample in family.samples:
            if sample.name in found:
                found[sample.name] += float(sample.value)
                seen.add(sample.name)
    if not seen:
        raise ValueError(f"the metrics hold none of {', '.join(IN_FLIGHT_METRICS)}: not a vLLM /metrics endpoint")
    running, waiting = found[IN_FLIGHT_METRICS[0]], found[IN_FLIGHT_METRICS[1]]
    return {"running": running, "waiting": waiting, "total": running + waiting}


SMOKE_TOOL_CHOICES = ("auto", "required", "named")


def smoke_request(model, max_tokens=256, tool=None, tool_choice="auto"):
    """The smoke test's /v1/chat/completions body: one tool (SMOKE_TOOL unless given), temperature 0.

    ``tool_choice`` auto lets the model decide (what a real model is judged on); required or named (the tool by its
    name) make vLLM's structured output produce a call, for a model that calls no tool by itself (a random one).
    """
    tool = tool or SMOKE_TOOL
    if tool_choice not in SMOKE_TOOL_CHOICES:
        raise ValueError(f"tool_choice {tool_choice!r} is none of {', '.join(SMOKE_TOOL_CHOICES)}")
    choice = tool_choice
    if tool_choice == "named":
        choice = {"type": "function", "function": {"name": tool["function"]["name"]}}
    return {
        "model": model,
        "messages": [{"role": "user", "content": SMOKE_PROMPT}],
        "tools": [tool],
        "tool_choice": choice,
        "temperature": 0,
        "max_tokens": int(max_tokens),
    }


def smoke_verdict(response, parser=None, tool=None):
    """{"ok", "reason"}: ok when the answer is one or more calls of the smoke tool, each with JSON-object arguments."""
    name = (tool or SMOKE_TOOL)["function"]["name"]
    try:
        message = _toolcall_eval.response_message(response)
    except (ValueError, TypeError) as exc:
        return {"ok": False, "reason": f"no usable chat completion: {exc}"}
    calls, problems = _toolcall_eval._parse_calls(message)
    if problems:
        return {"ok": False, "reason": "malformed tool call: " + "; ".join(problems)}
    if not calls:
        content = str(message.get("content") or "")
        if name in content or "<tool_call>" in content or '"arguments"' in content:
            return {
                "ok": False,
                "reason": (
                    f"the call came back as text in content, not as tool_calls ({content[:160]!r}): the server's "
                    f"--tool-call-parser{f' ({parser})' if parser else ''} does not read this model's tool-call "
                    "format; set vllm_options.tool-call-parser to the model's own parser"
                ),
            }
        return {"ok": False, "reason": f"no tool call in the answer (content: {content[:160]!r})"}
    wrong = [called for called, _arguments in calls if called != name]
    if wrong:
        return {"ok": False, "reason": f"called {', '.join(wrong)} instead of {name}"}
    return {"ok": True, "reason": f"{len(calls)} well-formed call(s) of {name}: {json.dumps(calls[0][1])}"}


def warmup_verdict(response):
    """{"ok", "reason"}: the warm-up request must come back as a chat completion with a message."""
    try:
        message = _toolcall_eval.response_message(response)
    except (ValueError, TypeError) as exc:
        return {"ok": False, "reason": f"no usable chat completion: {exc}"}
    if message.get("content") is None and not message.get("tool_calls"):
        return {"ok": False, "reason": "the completion holds neither content nor a tool call"}
    return {"ok": True, "reason": "answered"}


def node_drift(container, image, argv, env):
    """What differs between the running serving container (docker inspect) and the target; [] when none.

    ``container`` is community.docker.docker_container_info's ``container`` (None when absent); ``argv`` the plan's
    command (``vllm serve ...``), ``env`` the environment the unit passes (plan env plus the role's additions).
    """
    if not container:
        return ["no serving container runs"]
    state = container.get("State") or {}
    if not state.get("Running"):
        return [f"the serving container is {state.get('Status', 'not running')}"]
    config = container.get("Config") or {}
    drift = []
    if config.get("Image") != image:
        drift.append(f"image {config.get('Image')} -> {image}")
    # The serving secrets' loader in front of the plan's argv (_units.SECRETS_EXEC_PREFIX) is not vLLM's argv.
    running_argv = _units.served_command(list(config.get("Entrypoint") or []) + list(config.get("Cmd") or []))
    if [str(word) for word in running_argv] != [str(word) for word in argv]:
        before, after = set(map(str, running_argv)), set(map(str, argv))
        drift.append(
            "vLLM argv: removed "
            + (" ".join(sorted(before - after)) or "nothing")
            + ", added "
            + (" ".join(sorted(after - before)) or "nothing (order changed)")
        )
    held = dict(item.split("=", 1) for item in config.get("Env") or [] if "=" in item)
    for name in sorted(env):
        value = "" if env[name] is None else str(env[name])
        if held.get(name) != value:
            drift.append(f"environment {name}: {held.get(name)!r} -> {value!r}")
    return drift


def merge_proxy_views(views):
    """One list of servers from every proxy's haproxy_server ``servers``: a server is up only when every proxy
    holds it up, and its admin state is the most restrictive any proxy holds (maint, then drain, then ready)."""
    rank = {"ready": 0, "drain": 1, "maint": 2}
    merged = {}
    for servers in views:
        for server in servers:
            seen = merged.get(server["name"])
            if seen is None:
                merged[server["name"]] = dict(server)
                continue
            seen["up"] = bool(seen["up"] and server["up"])
            if not server["up"]:
                seen["operational"] = server["operational"]
            if rank.get(server["admin"], 2) > rank.get(seen["admin"], 2):
                seen["admin"] = server["admin"]
    return [merged[name] for name in sorted(merged)]


def failure_message(node, step, error, serving, command, drained=True):
    """What failed, where the site stands, and how to resume (a drained node stays drained)."""
    others = ", ".join(serving) if serving else "none (check the proxy: no replica is ready)"
    where = (
        f"{node} stays DRAINED in every proxy, across HAProxy restarts and reboots: no client request reaches it; "
        f"the other replicas keep serving"
        if drained
        else f"{node} was not drained or changed; the replicas keep serving"
    )
    return (
        f"Rolling upgrade stopped on {node} at step '{step}': {error}. {where} (ready: {others}). "
        f"Nodes after {node} were not touched. "
        f"Fix the cause (or revert the inventory / extra vars to the previous target), then resume with the same "
        f"command: {command}. Nodes already on the target and ready are skipped; {node} is upgraded again and "
        f"re-enabled only after its health check, warm-up and tool-call smoke test pass"
        + (
            f"; to put it back in service as it is instead: playbooks/ready.yml -e ready_servers={node}."
            if drained
            else "."
        )
    )


def node_timings(marks):
    """Per-node figures from the upgrade's time marks (seconds since the epoch, controller clock).

    ``marks``: {"drain", "stopped", "started", "healthy", "ready"} (``container_started`` optional: the container's
    own start). restart_s is the replica's own restart (container start, else unit start, to /health); the
    overhead is everything else the upgrade adds around it (drain wait, stop, apply, warm-up, smoke test, ready).
    """
    total = marks["ready"] - marks["drain"]
    start = marks.get("container_started") or marks["started"]
    restart = max(0.0, marks["healthy"] - start)
    return {
        "total_s": round(total, 2),
        "drain_wait_s": round(marks["stopped"] - marks["drain"], 2),
        "restart_s": round(restart, 2),
        "after_healthy_s": round(marks["ready"] - marks["healthy"], 2),
        "overhead_s": round(total - restart, 2),
    }
