# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""One round of the progress loop of a fetch or a copy, from the status file the transfer script writes."""

from __future__ import annotations


def format_size(num):
    return f"{num / 1048576:.1f} MiB"


def format_duration(seconds):
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    if seconds >= 60:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds} s"


def progress_round(node, phase, status, node_now, round_no, rounds, interval_s, stale_s, container):
    """One round of the progress loop; see :func:`_progress_round`. The line of a round that went wrong is its error."""
    report = _progress_round(node, phase, status, node_now, round_no, rounds, interval_s, stale_s, container)
    report.setdefault("msg", report["error"])
    return report


def _progress_round(node, phase, status, node_now, round_no, rounds, interval_s, stale_s, container):
    """One round of the progress loop, from the status file the transfer script writes.

    status: the parsed file or None (not written yet); node_now: the node's clock when it was read (the script
    writes its own clock, the same kernel's, into ``time``). Returns {"ended", "finished", "error", "msg",
    "bytes_done", "bytes_total", "rate", "eta_s"}: ``ended`` stops the loop; ``error`` (None, or what went wrong
    with node, numbers and fix) is for the task after the loop to fail with: a failed loop item would leave the
    task's own message at "One or more items failed".
    """
    where = f"round {round_no} of {rounds}"
    result = {"ended": False, "finished": False, "error": None, "bytes_done": 0, "bytes_total": 0}
    result.update(rate=None, eta_s=None)
    if status is None:
        waited = round_no * interval_s
        if waited > stale_s:
            return {
                **result,
                "ended": True,
                "error": (
                    f"{node}: the {phase} wrote no progress in {waited:.0f} s (model_weights_progress_stale_s "
                    f"{stale_s:g}): the container {container} did not start its script; see docker logs {container}"
                ),
            }
        return {**result, "msg": f"{node} {phase}: waiting for the first progress report, {where}"}
    done, total = int(status.get("bytes_done") or 0), int(status.get("bytes_total") or 0)
    result.update(bytes_done=done, bytes_total=total)
    started, first = status.get("started"), status.get("bytes_at_start")
    if started is not None and first is not None and status.get("time", 0) > started:
        result["rate"] = max(done - int(first), 0) / (status["time"] - started)
        if result["rate"] > 0 and total > done:
            result["eta_s"] = (total - done) / result["rate"]
    line = f"{node} {phase}: {format_size(done)} of {format_size(total)} ({100.0 * done / max(total, 1):.1f}%)"
    if result["rate"] is not None:
        line += f", {format_size(result['rate'])}/s"
    if result["eta_s"] is not None:
        line += f", ETA {format_duration(result['eta_s'])}"
    if status.get("finished"):
        if status.get("error"):
            return {
                **result,
                "ended": True,
                "error": (
                    f"{node}: the {phase} failed: {status['error']}. Partial files are kept: fix the cause and run "
                    "the role again to resume"
                ),
            }
        return {**result, "ended": True, "finished": True, "msg": f"{line}, done"}
    silent = node_now - float(status.get("time") or 0)
    if silent > stale_s:
        return {
            **result,
            "ended": True,
            "error": (
                f"{node}: the {phase} stopped reporting {silent:.0f} s ago at {format_size(done)} of "
                f"{format_size(total)} (model_weights_progress_stale_s {stale_s:g}): the container {container} died "
                f"or hangs; see docker logs {container}. Partial files are kept: run the role again to resume"
            ),
        }
    return {**result, "msg": f"{line}, {where}"}
