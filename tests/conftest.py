"""Make `ansible_collections.gb10.serving` importable from a plain checkout (collections/ links the repo in).

A skipped test is not a pass: a run that skipped anything fails (exit status 1) and names what was skipped and why,
so a missing host tool or an unbuilt image cannot turn a suite green. GB10_ALLOW_SKIPS=1 lets a developer's partial
run through; `make test` and CI never set it.
"""

import os
import sys
from pathlib import Path

import pytest

COLLECTIONS = Path(__file__).resolve().parents[1] / "collections"
if str(COLLECTIONS) not in sys.path:
    sys.path.insert(0, str(COLLECTIONS))
# Support modules the unit tests share (ansible_doc_support).
UNIT = Path(__file__).resolve().parent / "unit"
if str(UNIT) not in sys.path:
    sys.path.insert(0, str(UNIT))

_SKIPPED = []


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _SKIPPED.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session, exitstatus):
    if _SKIPPED and exitstatus == pytest.ExitCode.OK and os.environ.get("GB10_ALLOW_SKIPS") != "1":
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    if _SKIPPED and os.environ.get("GB10_ALLOW_SKIPS") != "1":
        terminalreporter.section("skipped tests fail this run (a skip is not a pass; GB10_ALLOW_SKIPS=1 to allow)")
        for line in _SKIPPED:
            terminalreporter.line(line)
