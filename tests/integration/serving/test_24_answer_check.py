# Copyright: gb10.serving maintainers
# Apache-2.0
"""The rolling upgrade's answer check (issue 40 item 4, roles/upgrade_node/tasks/answers.yml) on the served site.

A target whose engine answers otherwise (the same image and weights under another --dtype: the stand-in's greedy
answer follows the dtype and the weights' bytes, the real engine computes in another precision) is refused on the
first node: it stays drained, the message gives the differing prompts and both answers, the other replica serves
untouched. Then the same build as the one serving (the inventory's own profile) passes the check on that node, by
the same comparison, and the site is left as found. Opt-in: `make test-answer-check` (GB10_IT_ANSWER_CHECK=1,
against a running simulation): two rolling upgrades, measured 6 min 40 s on the stand-in (2 cores), outside make
test's budget.
"""

from __future__ import annotations

import os
import time

import pytest
from _profile import REAL_ENGINE
from test_20_rolling_upgrade import PLAYBOOK, output, target

FIRST, OTHER = "spark-1", "spark-2"
# The real vLLM 0.32 CPU engine computes bfloat16 by default; float32 is another precision it serves (float16 on
# CPU is not asked of it here). Not measured on the real engine in issue 40's session.
OTHER_DTYPE = "float32" if REAL_ENGINE else "float16"
pytestmark = pytest.mark.skipif(
    os.environ.get("GB10_IT_ANSWER_CHECK") != "1",
    reason="opt-in: make test-answer-check (GB10_IT_ANSWER_CHECK=1), two rolling upgrades, outside make test",
)
CHECK = "Require the upgraded replica to answer the greedy prompts as the reference does"


def _check_message(runner, outcome):
    for event in runner.events:
        data = event.get("event_data", {})
        if event.get("event") == outcome and data.get("task") == CHECK and data.get("host") == FIRST:
            return data["res"]["msg"]
    raise AssertionError(f"no {outcome} of '{CHECK}' on {FIRST}")


def test_a_replica_that_answers_otherwise_stays_drained_and_the_same_build_passes(served_sim):
    sim = served_sim
    started = time.monotonic()

    def other_dtype(profile):
        profile["vllm_options"]["dtype"] = OTHER_DTYPE

    try:
        refused = sim.playbook(PLAYBOOK, extravars=target(sim, other_dtype), check=False)
        text = output(refused)
        states = sim.backend_states()
        print(f"\nrefused: {_check_message(refused, 'runner_on_failed')}")
        assert refused.rc != 0, "a replica that answers otherwise was put back"
        assert f"the answer check refused {FIRST}: {FIRST} answered" in text
        assert f"greedy prompts as {OTHER} did" in text and "first difference at token" in text
        assert f'{FIRST} answered "' in text and f'{OTHER} answered "' in text
        assert f"{FIRST} stays DRAINED" in text
        assert states[FIRST][1] != 0, f"{FIRST} is not drained: {states}"
        assert states[OTHER] == (2, 0), f"{OTHER} does not serve: {states}"
        assert not any(OTHER_DTYPE in arg for arg in sim.running_argv(OTHER)), f"{OTHER} was touched"
    finally:
        # The same build as the one serving: upgraded again, compared with OTHER the same way, and put back.
        restored = sim.playbook(PLAYBOOK, check=False)
        sim.wait_all_ready()
    passed = _check_message(restored, "runner_on_ok")
    print(f"same build: {passed}\nanswer check test: {time.monotonic() - started:.1f} s")
    assert restored.rc == 0
    assert passed.startswith(f"{FIRST} answered 4 of 4 greedy prompts as {OTHER} did (0 differ, tolerance 0)"), passed
