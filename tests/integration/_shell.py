# Copyright: gb10.serving maintainers
# Apache-2.0
"""The integration tests' command runner: a failure names the command, its exit status and the tail of its output."""

from __future__ import annotations

import subprocess


def sh(argv, **kwargs):
    result = subprocess.run(argv, capture_output=True, text=True, check=False, **kwargs)
    if result.returncode != 0:
        raise AssertionError(f"{argv} exited {result.returncode}: {result.stdout[-3000:]}{result.stderr[-3000:]}")
    return result
