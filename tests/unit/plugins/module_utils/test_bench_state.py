# Copyright: gb10.serving maintainers
# Apache-2.0
"""The sweep as points recorded as each finishes (issue 20): an interrupted sweep resumes to the report an
uninterrupted one writes, and any input that shapes a measurement starts afresh, saying which."""

from __future__ import annotations

import json

from ansible_collections.gb10.serving.plugins.module_utils import _bench, _bench_state

TARGETS = [("spark-1", "http://10.77.0.11:8000"), ("spark-2", "http://10.77.0.12:8000"), ("proxy", "https://vip")]
PROMPTS = {"short": 64, "long": 4096}
LEVELS = [1, 4, 8]
RUN = {"requests_per_worker": 2, "max_tokens": 128, "request_timeout": 300, "run_deadline": 120}
PLAN = {"profile": "moe", "image": "registry:5000/vllm@sha256:aa", "nodes": {"spark-1": {"port": 8000}}}


def inputs(**changes):
    args = {"model": "m", "targets": TARGETS, "prompts": PROMPTS, "concurrency": LEVELS, "run": RUN, "identity": PLAN}
    return _bench_state.sweep_inputs(**{**args, **changes})


def points():
    return _bench_state.sweep_points([t for t, _url in TARGETS], PROMPTS, LEVELS)


class Site:
    """A deterministic stand-in of the load: a row from the point alone; counts what it was asked."""

    def __init__(self):
        self.measured, self.warmed, self.saved = [], [], []

    def measure(self, target, kind, level):
        self.measured.append((target, kind, level))
        tps = 100.0 * level / (1 + level / 8) / (4 if kind == "long" else 1)
        return {"target": target, "prompt": kind, "concurrency": level, "requests": 2 * level, "errors": 0,
                "tokens_per_s": round(tps, 2), "requests_per_min": 60.0, "ttft_p50_s": 0.1, "ttft_p90_s": 0.2,
                "warmups_excluded": 0, "metrics_tokens_per_s": round(tps, 2)}  # fmt: skip

    def warm_up(self, target):
        self.warmed.append(target)
        return {"target": target, "warmup": True, "ok": True}

    def save(self, state):
        # What the file holds after each point: the state an interruption at that moment leaves.
        self.saved.append(_bench_state.dump_state(state))


def report(state):
    names = [t for t, _url in TARGETS]
    recs = {name: _bench.recommend(state["rows"], name) for name in names}
    return _bench.render_markdown(state["rows"], recs), _bench_state.warmup_records(state, names)


def sweep(site, text, run_id, limit=0, fresh=False, given=None):
    state, note = _bench_state.resume(_bench_state.parse_state(text), given or inputs(), points(), run_id, fresh)
    measured = _bench_state.advance(state, points(), site.measure, site.warm_up, site.save, run_id, limit)
    return state, note, measured


def test_the_points_are_every_target_kind_and_level_in_the_order_measured():
    assert len(points()) == 3 * 2 * 3
    assert points()[:4] == [("spark-1", "long", 1), ("spark-1", "long", 4), ("spark-1", "long", 8),
                            ("spark-1", "short", 1)]  # fmt: skip
    assert points()[-1] == ("proxy", "short", 8)


def test_an_interrupted_sweep_resumes_to_the_report_of_an_uninterrupted_one():
    whole = Site()
    complete, _note, _measured = sweep(whole, "", "run-a")
    for k in (1, 5, 17):
        first, second = Site(), Site()
        sweep(first, "", "run-1", limit=k)
        left = first.saved[-1]  # the file when the run was stopped after its k-th point
        state, note, measured = sweep(second, left, "run-2")
        assert [(r["target"], r["prompt"], r["concurrency"]) for r in measured] == points()[k:]
        assert second.measured == points()[k:], "a recorded point was measured again"
        assert note.startswith(f"resumed: {k} of 18 point(s) recorded earlier")
        assert report(state)[0] == report(complete)[0]
        assert json.loads(_bench_state.dump_state(state))["rows"] == complete["rows"]
        # Each target still measured in this run is warmed up first: the engine may have restarted since.
        assert second.warmed == list(dict.fromkeys(t for t, _kind, _level in points()[k:]))


def test_a_finished_sweep_run_again_measures_nothing_and_says_how_to_measure_again():
    site = Site()
    sweep(site, "", "run-1")
    again = Site()
    state, note, measured = sweep(again, site.saved[-1], "run-2")
    assert measured == [] and again.measured == [] and len(state["rows"]) == 18
    assert "bench_fresh=true or delete the file" in note
    line = _bench_state.progress_line(state, points(), measured, note)
    assert line.startswith("18/18 points done, sweep complete; resumed: 18 of 18")


def test_fresh_discards_an_earlier_run_once_not_the_rounds_of_this_run():
    site = Site()
    sweep(site, "", "run-1")
    fresh = Site()
    state, note, _measured = sweep(fresh, site.saved[-1], "run-2", limit=1, fresh=True)
    assert note == "fresh sweep asked for: 18 recorded point(s) discarded" and len(state["rows"]) == 1
    # The next round of the same run keeps the point the first round measured.
    state, note, _measured = sweep(fresh, fresh.saved[-1], "run-2", limit=1, fresh=True)
    assert note == "" and len(state["rows"]) == 2 and fresh.measured == points()[:2]


def test_an_input_that_shapes_a_measurement_starts_afresh_naming_it():
    site = Site()
    sweep(site, "", "run-1", limit=3)
    for changed, name in (
        (inputs(concurrency=[1, 2, 4]), "concurrency"),
        (inputs(run={**RUN, "max_tokens": 16}), "max_tokens"),
        (inputs(identity={**PLAN, "image": "registry:5000/vllm@sha256:bb"}), "site"),
    ):
        state, note, _measured = sweep(Site(), site.saved[-1], "run-2", limit=1, given=changed)
        assert note.endswith(f"were measured with another {name}: starting afresh"), note
        assert len(state["rows"]) == 1


def test_the_recommendation_inputs_do_not_shape_the_key():
    # bench_weights, bench_tolerance and bench_ttft_limit are not inputs: a new mix re-reads the recorded rows.
    assert _bench_state.inputs_key(inputs()) == _bench_state.inputs_key(inputs())
    assert "weights" not in inputs() and "tolerance" not in inputs()


def test_a_damaged_or_foreign_state_file_is_a_fresh_sweep():
    for text in ("", "{", "[]", json.dumps({"format": 0, "rows": []})):
        assert _bench_state.parse_state(text) is None
    site = Site()
    sweep(site, "", "run-1", limit=2)
    state = json.loads(site.saved[-1])
    state["rows"].reverse()
    resumed, note, _measured = sweep(Site(), json.dumps(state), "run-2", limit=1)
    assert note.endswith("are not this sweep's: starting afresh") and len(resumed["rows"]) == 1


def test_the_progress_line_names_target_kind_level_and_done_of_total():
    site = Site()
    state, _note, measured = sweep(site, "", "run-1", limit=4)
    line = _bench_state.progress_line(state, points(), measured)
    assert line == "spark-1 short concurrency 1: 4/18 points done, 88.9 tokens/s, 0 error(s)"
