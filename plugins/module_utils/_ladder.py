# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Context ladder: climb context rungs with hard abort criteria, keep the last rung that held (seed 004).

Pure functions over plain data. Per rung, the playbook restarts serving with that max length, sends a long-context
recall request of about that many tokens and watches every node; this module turns what it saw into a verdict and
the report. A rung trips when, on any node: MemAvailable fell below the abort threshold (default 4 GiB), earlyoom
signalled a process, the kernel logged an OOM kill or a UVM error since the rung started, or the ssh round trip
degraded (an OOM on unified memory took sshd down while ICMP still answered). A rung also trips when serving did
not come up or a recall answer fails the recall check: it lacks the needle ("needle", for a model that follows
instructions), or the engine read fewer prompt tokens than the prompt has words ("prompt_tokens", for one that does
not: a base model, or a randomly initialised checkpoint). A rung the serving plan refuses (its violations, such as
a context above the model's length) is judged before anything on a node changes for it: nothing is restarted,
nothing is watched. The first tripped rung stops the climb; the rung below it is the working configuration.
"""

from __future__ import annotations

import re

from ansible_collections.gb10.serving.plugins.module_utils._earlyoom import kills
from ansible_collections.gb10.serving.plugins.module_utils._loadgen import FILLER_WORDS

DEFAULT_RUNGS = (32768, 131072, 262144)
DEFAULT_MEM_ABORT_MIB = 4096
DEFAULT_SSH_LIMIT_S = 10.0
DEFAULT_SSH_FACTOR = 5.0
DEFAULT_RESERVE_TOKENS = 1024
# What a recall answer is held to; the serving plan's CONTEXT_RECALLS (the profile's context_recall) is this list.
RECALL_CHECKS = ("needle", "prompt_tokens")

_KERNEL_TRIPS = (
    ("kernel OOM", re.compile(r"invoked oom-killer|Out of memory: Killed process|oom-kill:|oom_reaper", re.I)),
    ("UVM", re.compile(r"nvidia-uvm|\bUVM\b.*(error|fail|fault|out of memory)|uvm_.*(error|fail)", re.I)),
)


class LadderError(ValueError):
    """The rungs or thresholds the operator gave cannot make a ladder."""


def rungs(values=None, model_max=None):
    """The rungs in climbing order: positive, strictly increasing, none above the model's own maximum."""
    values = list(values or DEFAULT_RUNGS)
    problems = []
    if any(not isinstance(v, int) or isinstance(v, bool) or v <= 0 for v in values):
        problems.append(f"rungs must be positive integers, got {values}")
    elif values != sorted(set(values)):
        problems.append(f"rungs must climb (strictly increasing), got {values}")
    elif model_max and values[-1] > int(model_max):
        problems.append(f"rung {values[-1]} is above the model's maximum context {model_max}")
    if problems:
        raise LadderError("; ".join(problems))
    return values


def recall_words(context_tokens, reserve_tokens=DEFAULT_RESERVE_TOKENS):
    """How many words recall_prompt() puts before its question: each is at least one token in any tokenizer."""
    return max(16, int(context_tokens) - int(reserve_tokens))


def recall_prompt(context_tokens, needle, reserve_tokens=DEFAULT_RESERVE_TOKENS):
    """A prompt of about ``context_tokens - reserve_tokens`` tokens with ``needle`` buried two thirds in.

    One common word per token, approximately; ``reserve_tokens`` leaves room for the chat template and the
    answer. A prompt the server finds too long is refused by it, and the rung records that refusal.
    """
    words = recall_words(context_tokens, reserve_tokens)
    at = (words * 2) // 3
    filler = [FILLER_WORDS[n % len(FILLER_WORDS)] for n in range(words)]
    filler[at] = f"The secret code is {needle}."
    return " ".join(filler) + "\nWhat is the secret code? Answer with the code only."


def kernel_trips(lines):
    """[(kind, line)] for kernel OOM and UVM lines."""
    found = []
    for line in lines:
        for kind, pattern in _KERNEL_TRIPS:
            if pattern.search(line):
                found.append((kind, line.strip()))
                break
    return found


def evaluate_node(
    node, obs, mem_abort_mib=DEFAULT_MEM_ABORT_MIB, ssh_limit_s=DEFAULT_SSH_LIMIT_S, ssh_factor=DEFAULT_SSH_FACTOR
):
    """Reasons one node trips, from its observations during the rung.

    obs: {"mem_available_mib": [samples], "earlyoom_lines": [...], "kernel_lines": [...],
    "ssh_rtt_s": [samples], "ssh_baseline_s": float|None}.
    """
    reasons = []
    mem = [float(v) for v in obs.get("mem_available_mib") or []]
    if not mem:
        reasons.append(f"{node}: no MemAvailable sample (node unreachable?)")
    elif min(mem) < mem_abort_mib:
        reasons.append(
            f"{node}: MemAvailable fell to {min(mem):.0f} MiB, below the abort threshold {mem_abort_mib} MiB"
        )
    for signal, pid, name in kills(obs.get("earlyoom_lines") or []):
        reasons.append(f"{node}: earlyoom sent {signal} to {name} (pid {pid})")
    for kind, line in kernel_trips(obs.get("kernel_lines") or []):
        reasons.append(f"{node}: {kind} in the kernel log: {line[:160]}")
    rtts = [float(v) for v in obs.get("ssh_rtt_s") or []]
    baseline = obs.get("ssh_baseline_s")
    if rtts:
        worst = max(rtts)
        if worst > ssh_limit_s:
            reasons.append(f"{node}: ssh round trip {worst:.2f}s, over {ssh_limit_s:.2f}s")
        elif baseline and worst > float(baseline) * ssh_factor and worst > 0.2:
            reasons.append(f"{node}: ssh round trip {worst:.2f}s, {ssh_factor:g}x its baseline {float(baseline):.2f}s")
    return reasons


def plan_refusal(rung, violations):
    """The verdict on a rung the serving plan refused: its violations in the plan's own words, no measurements.

    ``violations``: the plan's, each {"node", "rule", "value", "message"[, "fix"]} (the message names the numbers
    and the fix). Nothing on a node changed for the rung, so there is nothing measured and nothing to restore.
    """
    reasons = [f"the plan refused --max-model-len {rung}; nothing on a node changed for it"]
    for found in violations:
        text = f"the plan: [{found.get('node', 'all')}] {found.get('rule')}: {found.get('message')}"
        reasons.append(text + (f" Fix: {found['fix']}" if found.get("fix") else ""))
    return {"rung": rung, "tripped": True, "refused_by": "plan", "reasons": reasons, "measurements": {}}


def _recall_reasons(answers, needle, recall, prompt_tokens, words):
    if recall == "needle":
        return [
            f"recall failed: answer {n + 1} of {len(answers)} does not hold {needle!r}"
            for n, answer in enumerate(answers)
            if needle not in str(answer or "")
        ]
    read = list(prompt_tokens or [])
    read += [0] * (len(answers) - len(read))
    return [
        f"recall failed: replica {n + 1} of {len(answers)} read {int(tokens or 0)} prompt tokens, fewer than the "
        f"prompt's {words} words (usage.prompt_tokens: the engine did not take the whole prompt in)"
        for n, tokens in enumerate(read[: len(answers)])
        if int(tokens or 0) < words
    ]


def evaluate_rung(
    rung,
    nodes,
    serving_ok,
    recall_answer,
    needle,
    serving_errors=None,
    plan_violations=None,
    recall="needle",
    prompt_tokens=None,
    reserve_tokens=DEFAULT_RESERVE_TOKENS,
    **limits,
):
    """{"rung", "tripped", "refused_by", "reasons", "measurements"} for one rung over every node's observations.

    ``recall_answer``: the answer text, or a list of them (one per replica).
    ``recall``: "needle", every answer must hold the needle; "prompt_tokens", every replica's
    ``prompt_tokens`` (its usage.prompt_tokens, in the order of the answers) must reach the prompt's word count,
    recall_words(rung, reserve_tokens): it took the whole prompt in. The second proves the engine serves the rung,
    not that the model recalls: for a model that does not follow the question.
    ``serving_errors``: {node: [the engine's error lines]} where serving did not come up (its journal's words,
    such as vLLM's refusal when the KV cache cannot hold one request of the rung).
    ``plan_violations``: the serving plan's violations for the rung; when there are any, the rung was never
    applied and they alone are the verdict (plan_refusal). ``refused_by``: "plan", "engine" (serving did not
    come up) or None.
    """
    if plan_violations:
        return plan_refusal(rung, plan_violations)
    reasons = []
    answers = recall_answer if isinstance(recall_answer, list) else ([] if recall_answer is None else [recall_answer])
    if not serving_ok:
        reasons.append(f"serving did not become healthy with --max-model-len {rung}")
        for node, lines in sorted((serving_errors or {}).items()):
            for line in list(dict.fromkeys(lines or []))[-2:]:
                reasons.append(f"{node}: the engine said: {line[:600]}")
    elif not answers:
        reasons.append("the recall request got no answer")
    else:
        if recall not in RECALL_CHECKS:
            raise LadderError(f"recall must be one of {', '.join(RECALL_CHECKS)}, got {recall!r}")
        words = recall_words(rung, reserve_tokens)
        reasons.extend(_recall_reasons(answers, needle, recall, prompt_tokens, words))
    measurements = {}
    for node, obs in sorted(nodes.items()):
        reasons.extend(evaluate_node(node, obs, **limits))
        mem = [float(v) for v in obs.get("mem_available_mib") or []]
        rtts = [float(v) for v in obs.get("ssh_rtt_s") or []]
        measurements[node] = {
            "mem_available_min_mib": round(min(mem)) if mem else None,
            "earlyoom_kills": len(kills(obs.get("earlyoom_lines") or [])),
            "kernel_trips": len(kernel_trips(obs.get("kernel_lines") or [])),
            "ssh_rtt_max_s": round(max(rtts), 3) if rtts else None,
        }
    return {
        "rung": rung,
        "tripped": bool(reasons),
        "refused_by": None if serving_ok else "engine",
        "reasons": reasons,
        "measurements": measurements,
    }


def next_step(planned, results):
    """What the climb does next: {"action": "climb"|"restore"|"stop"|"done", "rung", "working"}.

    ``results`` are evaluate_rung() outputs in climbing order. After a trip, the rung below becomes the working
    configuration (None when the first rung tripped: nothing held): restored when the tripped rung was applied,
    left as it runs ("stop") when the plan refused the tripped rung, which then never reached a node.
    """
    held = [r["rung"] for r in results if not r["tripped"]]
    working = held[-1] if held else None
    if results and results[-1]["tripped"]:
        action = "stop" if results[-1].get("refused_by") == "plan" else "restore"
        return {"action": action, "rung": working, "working": working}
    remaining = [r for r in planned if r not in {x["rung"] for x in results}]
    if remaining:
        return {"action": "climb", "rung": remaining[0], "working": working}
    return {"action": "done", "rung": None, "working": working}


_RECALL_WORDS = {
    "needle": "every answer must hold the code buried in the prompt",
    "prompt_tokens": (
        "every replica must take the whole prompt in (usage.prompt_tokens); the model's recall is not judged"
    ),
}


def report(profile, planned, results, limits, recall="needle"):
    """The YAML-able report of the climb."""
    step = next_step(planned, results)
    return {
        "profile": profile,
        "recall": recall,
        "planned_rungs": list(planned),
        "working_rung": step["working"],
        "stopped_at": results[-1]["rung"] if results and results[-1]["tripped"] else None,
        "stopped_by": results[-1].get("refused_by") if results and results[-1]["tripped"] else None,
        "limits": dict(limits),
        "rungs": list(results),
    }


def render_markdown(rep):
    """The report as a Markdown table, one row per rung and node."""
    lines = [
        f"# Context ladder: {rep['profile']}",
        "",
        f"Working rung: **{rep['working_rung'] if rep['working_rung'] is not None else 'none held'}**"
        + (f"; stopped at {rep['stopped_at']}" if rep["stopped_at"] else "")
        + (" (refused by the plan: nothing on a node changed for it)" if rep.get("stopped_by") == "plan" else ""),
        "",
        f"Recall check: {rep.get('recall', 'needle')}: {_RECALL_WORDS.get(rep.get('recall', 'needle'), '')}.",
        "",
        "| rung | node | MemAvailable min MiB | earlyoom kills | kernel OOM/UVM | ssh max s | verdict |",
        "| ---: | --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for res in rep["rungs"]:
        verdict = "tripped" if res["tripped"] else "held"
        if res.get("refused_by") == "plan":
            lines.append(f"| {res['rung']} | all | - | - | - | - | refused by the plan |")
        for node, m in sorted(res["measurements"].items()):
            mem = "-" if m["mem_available_min_mib"] is None else m["mem_available_min_mib"]
            rtt = "-" if m["ssh_rtt_max_s"] is None else m["ssh_rtt_max_s"]
            lines.append(
                f"| {res['rung']} | {node} | {mem} | {m['earlyoom_kills']} | {m['kernel_trips']} | {rtt} | {verdict} |"
            )
    for res in rep["rungs"]:
        for reason in res["reasons"]:
            lines.append(f"- {res['rung']}: {reason}")
    untried = [r for r in rep["planned_rungs"] if r not in {x["rung"] for x in rep["rungs"]}]
    if untried:
        lines.append(f"- not tried: {', '.join(str(r) for r in untried)}")
    return "\n".join(lines) + "\n"
