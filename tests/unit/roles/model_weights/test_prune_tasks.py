# Copyright: gb10.serving maintainers
# Apache-2.0
"""The role's prune (roles/model_weights/tasks/prune.yml) run by ansible-playbook on localhost where nothing is
superseded: it must skip cleanly, reading no container and starting none (there is no Docker engine here, so a
Docker task that ran would fail the play), and report why each revision stays.

The deletion itself (the script in the serving image, huggingface_hub's own cache API) is test_weights_prune.py; the
decision is tests/unit/plugins/module_utils/_weights/test_weights_revisions.py; the live run is molecule/model_weights.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from task_file_runner import run_task_file

REPO = Path(__file__).resolve().parents[4]
PRUNE = REPO / "roles" / "model_weights" / "tasks" / "prune.yml"
ROLE_VARS = yaml.safe_load((REPO / "roles" / "model_weights" / "vars" / "main.yml").read_text())
OLD, NEW = "1" * 40, "2" * 40


def run_prune(tmp_path, revisions, keep):
    cache = tmp_path / "hf-cache"
    for revision in revisions:
        (cache / "hub" / "models--org--m" / "snapshots" / revision).mkdir(parents=True)
    variables = {
        **ROLE_VARS,
        "model_weights_hf_cache_dir": str(cache),
        "model_weights_state_dir": str(tmp_path / "state"),
        "model_weights_repo_id": "org/m",
        "model_weights_revision": NEW,
        "model_weights_keep_revisions": keep,
        "model_weights_image": "gb10-sim/hf-client:2.4.0",
        "model_weights_timeout_s": 60,
        "model_weights_disk_reserve_gib": 10,
    }
    return run_task_file(tmp_path, PRUNE, variables, name="The role's prune")


@pytest.mark.parametrize(
    ("revisions", "keep", "count"),
    [((NEW,), 1, 1), ((), 1, 0), ((OLD, NEW), 2, 2)],
    ids=["only-the-served-one", "no-snapshots-folder", "keep-two-of-two"],
)
def test_nothing_superseded_skips_cleanly_without_docker(tmp_path, revisions, keep, count):
    rc, out = run_prune(tmp_path, revisions, keep)
    assert rc == 0, out[-3000:]
    assert f"localhost: nothing to prune of org/m: {count} revision(s) in the cache" in out
    assert f"{NEW[:12]} kept: the revision the plan serves" in out or not revisions
    assert "changed=0" in out and "failed=0" in out
    # the container's tasks are one include (tasks/prune_run.yml), skipped as a whole
    for task in ("Read the running containers", "Prune in a throwaway container of the serving image"):
        assert result_of(out, task) == "skipping: [localhost]", out[-3000:]
    assert "Look for the serving image" not in out and "Delete the superseded revisions" not in out


def result_of(out, task):
    """The first line of the result of the task whose name starts with ``task``."""
    for chunk in out.split("TASK [")[1:]:
        name, _stars, rest = chunk.partition("]")
        if name.startswith(task):
            return next(line for line in rest.splitlines() if line.strip() and not line.strip().startswith("*"))
    raise AssertionError(f"no task {task!r} ran")


def test_keep_below_one_is_refused(tmp_path):
    rc, out = run_prune(tmp_path, (OLD, NEW), 0)
    assert rc == 2
    assert "localhost: model_weights_keep_revisions is 0: give how many revisions" in out
