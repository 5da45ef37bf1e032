# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The concurrency sweep as points that are measured one at a time, recorded as each finishes, and resumed.

Issue 20: the sweep was one module call that printed nothing until every target and level was done, and an
interruption (a closed laptop, a restarted node, Ctrl-C) lost every point it had measured. Here the sweep is a list
of (target, prompt kind, concurrency) points in the order they are measured; the state file on the control machine
holds each finished point's row, written when it finishes, under a key of every input that shapes a measurement.
A run with the same key goes on from the first point not recorded; any other input starts afresh, saying which.
Weights, tolerance and the TTFT limit only shape the recommendation, so changing them re-reads the recorded rows
instead of measuring again.

Pure functions over plain data; the module (bench_sweep) reads and writes the file and sends the load.
"""

from __future__ import annotations

import hashlib
import json

STATE_FILE = "bench-state.json"
FORMAT = 1


def sweep_points(targets, prompts, concurrency):
    """[(target, prompt kind, concurrency)] in the order they are measured: per target, per kind, per level."""
    return [(target, kind, int(level)) for target in targets for kind in sorted(prompts) for level in concurrency]


def sweep_inputs(model, targets, prompts, concurrency, run, identity=None):
    """What a recorded row depends on: model, targets ([name, url]), prompts, levels, the per-run bounds ``run``
    ({requests_per_worker, max_tokens, request_timeout, run_deadline}) and the site's ``identity`` (the serving
    plan, kept as its hash: a changed profile or image must be measured again)."""
    site = None if identity is None else hashlib.sha256(_canonical(identity).encode()).hexdigest()
    return {
        "model": model,
        "targets": [[name, url] for name, url in targets],
        "prompts": {kind: int(size) for kind, size in sorted(prompts.items())},
        "concurrency": [int(level) for level in concurrency],
        **{name: run[name] for name in sorted(run)},
        "site": site,
    }


def _canonical(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def inputs_key(inputs):
    return hashlib.sha256(_canonical(inputs).encode()).hexdigest()


def parse_state(text):
    """The state file's content, or None when it is absent, empty, not this format or not JSON."""
    try:
        state = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(state, dict) or state.get("format") != FORMAT or not isinstance(state.get("rows"), list):
        return None
    return state


def dump_state(state):
    return json.dumps(state, indent=2, sort_keys=True) + "\n"


def _fresh(inputs, run_id):
    return {"format": FORMAT, "key": inputs_key(inputs), "inputs": inputs, "run": run_id, "rows": [], "warmups": {}}


def _rows_match(rows, points):
    if len(rows) > len(points):
        return False
    return [(r.get("target"), r.get("prompt"), r.get("concurrency")) for r in rows] == points[: len(rows)]


def resume(state, inputs, points, run_id, fresh=False, state_path=STATE_FILE):
    """(the state this run continues, a note for the operator or "").

    ``state``: the parsed file or None; ``run_id``: the same for every round of one playbook run, so that
    ``fresh`` discards what an earlier run recorded once, not the rounds of this run.
    """
    if state is None:
        return _fresh(inputs, run_id), ""
    recorded = len(state["rows"])
    if state.get("run") == run_id:
        return state, ""
    if fresh:
        return _fresh(inputs, run_id), f"fresh sweep asked for: {recorded} recorded point(s) discarded"
    if state.get("key") != inputs_key(inputs):
        old = state.get("inputs") or {}
        changed = sorted(name for name in set(old) | set(inputs) if old.get(name) != inputs.get(name))
        return _fresh(inputs, run_id), (
            f"{recorded} point(s) in {state_path} were measured with another {', '.join(changed) or 'format'}: "
            "starting afresh"
        )
    if not _rows_match(state["rows"], points):
        return _fresh(inputs, run_id), f"the points in {state_path} are not this sweep's: starting afresh"
    kept = {**state, "run": run_id}
    if not recorded:
        return kept, ""
    return kept, (
        f"resumed: {recorded} of {len(points)} point(s) recorded earlier in {state_path} "
        "(-e bench_fresh=true or delete the file to measure them again)"
    )


def needs_warmup(state, target, run_id):
    """The first request after any start is never counted: each target gets one before its first point of a run."""
    return (state["warmups"].get(target) or {}).get("run") != run_id


def advance(state, points, measure, warm_up, save, run_id, limit=0):
    """Measure the points not yet recorded, in order, at most ``limit`` (0: all); each row is saved as it finishes.

    ``measure(target, kind, level)`` returns the row; ``warm_up(target)`` the warm-up record; ``save(state)``
    writes the state file. Returns the rows measured by this call.
    """
    measured = []
    while len(state["rows"]) < len(points) and (not limit or len(measured) < limit):
        target, kind, level = points[len(state["rows"])]
        if needs_warmup(state, target, run_id):
            state["warmups"][target] = {"run": run_id, "record": warm_up(target)}
        row = measure(target, kind, level)
        state["rows"].append(row)
        save(state)
        measured.append(row)
    return measured


def warmup_records(state, targets):
    """The latest warm-up of each target, in target order (bench.json's ``warmups``)."""
    return [state["warmups"][t]["record"] for t in targets if t in state["warmups"]]


def progress_line(state, points, measured, note=""):
    """One line for the loop label: the point that finished, done/total, its tokens/s and errors; or the end."""
    done, total = len(state["rows"]), len(points)
    if measured:
        row = measured[-1]
        tps = row.get("tokens_per_s")
        line = (
            f"{row['target']} {row['prompt']} concurrency {row['concurrency']}: {done}/{total} points done, "
            f"{'-' if tps is None else f'{tps:.1f}'} tokens/s, {row.get('errors', 0)} error(s)"
        )
    else:
        line = f"{done}/{total} points done"
    if done >= total:
        line += ", sweep complete"
    return f"{line}; {note}" if note else line
