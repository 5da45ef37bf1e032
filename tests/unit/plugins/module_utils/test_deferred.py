"""module_utils/_deferred: the filter files' module_utils, imported at first use (docs/converge-cost.md)."""

import json
import os
import subprocess
import sys
from pathlib import Path

from ansible_collections.gb10.serving.plugins.module_utils import _deferred

FILTERS = Path(__file__).resolve().parents[4] / "plugins" / "filter"

# ansible-core loads every filter file of the collection in each task's worker that uses one of them: none of them
# may pull in these at load (0.1 s a task together, measured; the rest of the files' imports are a few ms).
HEAVY = (
    "ansible_collections.gb10.serving.plugins.module_utils._plan",
    "ansible.module_utils.urls",
    "packaging.requirements",
)


def test_loading_every_filter_file_imports_no_heavy_module():
    names = sorted(path.stem for path in FILTERS.glob("*.py"))
    assert len(names) > 10
    probe = (
        "import importlib, json, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module('ansible_collections.gb10.serving.plugins.filter.' + name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path for path in sys.path if path))  # a fresh interpreter
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, env=env)
    loaded = set(json.loads(done.stdout))
    assert not [name for name in HEAVY if name in loaded]


def test_a_deferred_module_imports_at_first_read_and_reads_through():
    deferred = _deferred.module_utils("_fabric")
    from ansible_collections.gb10.serving.plugins.module_utils import _fabric

    assert "_fabric" in repr(deferred)
    names = [name for name in dir(_fabric) if not name.startswith("__")]
    assert names and all(getattr(deferred, name) is getattr(_fabric, name) for name in names)


def test_a_deferred_filter_raises_the_modules_own_errors():
    deferred = _deferred.module_utils("_no_such_module")
    try:
        deferred.anything  # noqa: B018 -- the read is the test
    except ModuleNotFoundError as err:
        assert "_no_such_module" in str(err)
    else:
        raise AssertionError("a missing module must fail at the first read")
