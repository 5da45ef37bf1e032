# Copyright: gb10.serving maintainers
# Apache-2.0
"""weights_transfer.py as the role deploys it: beside the collection's _weights package, the collection nowhere else.

The serving image the script runs in has no collection installed; roles/weights_transfer (tasks/install.yml) installs
the script and every module of the package into the state folder the container mounts. Run from a copy of that
folder, with another working directory and no PYTHONPATH, the script must import _weights from its own folder, and
fail without it (so the pass is not the checkout's doing).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
SCRIPT = REPO / "roles" / "weights_transfer" / "files" / "weights_transfer.py"
WEIGHTS = REPO / "plugins" / "module_utils" / "_weights"


def run_help(folder, cwd):
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, str(folder / "weights_transfer.py"), "--help"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_deployed_script_imports_the_collections_rules_from_its_own_folder(tmp_path):
    state, elsewhere = tmp_path / "gb10-weights", tmp_path / "elsewhere"
    state.mkdir()
    elsewhere.mkdir()
    shutil.copy2(SCRIPT, state / "weights_transfer.py")
    done = run_help(state, elsewhere)
    assert done.returncode != 0
    assert "No module named '_weights'" in done.stderr

    shutil.copytree(WEIGHTS, state / "_weights", ignore=shutil.ignore_patterns("__pycache__"))
    done = run_help(state, elsewhere)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "{fetch,serve,receive,prune}" in done.stdout
