"""Make `ansible_collections.gb10.serving` importable from a plain checkout (collections/ links the repo in).

A skipped test is not a pass: a run that skipped anything fails (exit status 1) and names what was skipped and why,
so a missing host tool or an unbuilt image cannot turn a suite green. GB10_ALLOW_SKIPS=1 lets a developer's partial
run through; `make test` and CI never set it.

Where GB10_FAILED_TESTS names a file (scripts/stages.sh sets it for make test), each failed or erroring test appends
one line to it: its id and the first line of why. The served-site suite runs inside molecule's verify, whose output
reaches the CI log as one Ansible blob; this file is how the log's last lines still name the test that failed.
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


def _record_failure(report):
    path = os.environ.get("GB10_FAILED_TESTS")
    if not path:
        return
    crash = getattr(report.longrepr, "reprcrash", None)
    why = crash.message if crash is not None else str(report.longrepr)
    first = next((line for line in why.splitlines() if line.strip()), "")
    phase = "" if report.when == "call" else f" (in {report.when})"
    with open(path, "a", encoding="utf-8") as out:
        out.write(f"{'FAILED' if report.when == 'call' else 'ERROR'} {report.nodeid}{phase}: {first[:300]}\n")


def pytest_runtest_logreport(report):
    if report.failed:
        _record_failure(report)
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _SKIPPED.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session, exitstatus):
    if _SKIPPED and exitstatus == pytest.ExitCode.OK and os.environ.get("GB10_ALLOW_SKIPS") != "1":
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if os.environ.get("GB10_FAILED_TESTS"):
            with open(os.environ["GB10_FAILED_TESTS"], "a", encoding="utf-8") as out:
                out.writelines(f"SKIPPED (a skip fails the run) {line.splitlines()[0][:300]}\n" for line in _SKIPPED)


def pytest_terminal_summary(terminalreporter):
    if _SKIPPED and os.environ.get("GB10_ALLOW_SKIPS") != "1":
        terminalreporter.section("skipped tests fail this run (a skip is not a pass; GB10_ALLOW_SKIPS=1 to allow)")
        for line in _SKIPPED:
            terminalreporter.line(line)
