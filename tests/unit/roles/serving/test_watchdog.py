# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/serving/files/gb10-serving-watchdog: when it restarts its unit, and when it must not."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[4] / "roles" / "serving" / "files" / "gb10-serving-watchdog"
_loader = importlib.machinery.SourceFileLoader("gb10_serving_watchdog", str(SCRIPT))
_spec = importlib.util.spec_from_loader("gb10_serving_watchdog", _loader)
watchdog = importlib.util.module_from_spec(_spec)
_loader.exec_module(watchdog)


def step(failures, probe_ok=False, enabled=True, active=True, active_for=5000.0):
    return watchdog.decide(failures, probe_ok, enabled, active, active_for, grace_s=1200, threshold=3)


def test_restarts_only_after_n_failures_in_a_row():
    failures, actions = 0, []
    for _probe in range(3):
        action, failures = step(failures)
        actions.append(action)
    assert actions == ["failing", "failing", "restart"] and failures == 0
    assert step(2, probe_ok=True) == ("healthy", 0)


def test_pitfall_stopped_watchdog_restarts_conflicting_unit():
    # Seed 002: the old topology's watchdog would restart its unit, whose Conflicts= stops the new topology.
    # A disabled unit (the other topology is applied) or a stopped one is never touched, whatever the probes say.
    assert step(2, enabled=False) == ("skip-disabled", 0)
    assert step(2, active=False) == ("skip-inactive", 0)


def test_no_restart_inside_the_start_grace():
    # A replica loads its model for minutes; failed probes then are not counted.
    assert step(2, active_for=30.0) == ("starting", 0)


def test_main_never_calls_restart_for_a_disabled_unit(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(watchdog, "_unit_state", lambda unit: (False, False, 0.0))
    monkeypatch.setattr(watchdog, "_probe", lambda url, timeout: calls.append(("probe", url)) or False)
    monkeypatch.setattr(watchdog, "_systemctl", lambda *args: calls.append(args))
    state = tmp_path / "failures"
    state.write_text("2\n")
    args = ["--unit", "gb10-vllm-tp.service", "--url", "http://10.0.0.1:8000/health", "--state", str(state)]
    assert watchdog.main(args) == 0
    assert calls == [] and state.read_text() == "0\n"
