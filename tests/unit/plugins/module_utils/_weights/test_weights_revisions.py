# Copyright: gb10.serving maintainers
# Apache-2.0
"""plugins/module_utils/_weights/revisions.py: which cached revisions of the model are superseded (issue 19: every
upgrade left the old 181 GiB revision in the cache, and the disk filled), and which revisions a running container has
mounted."""

from __future__ import annotations

import pytest

from ansible_collections.gb10.serving.plugins.filter.weights_prune_plan import weights_prune_plan
from ansible_collections.gb10.serving.plugins.module_utils._weights.revisions import (
    revisions_in_use,
    superseded_revisions,
)

A, B, C, D = ("a" * 40, "b" * 40, "c" * 40, "d" * 40)
REPO = "gb10-sim/tiny-moe"
FOLDER = "models--gb10-sim--tiny-moe"


def cached(**mtimes):
    """{commit: CachedRevisionInfo's figures} with a blob mtime per commit (A=1 is older than B=2)."""
    commits = {"A": A, "B": B, "C": C, "D": D}
    return {commits[name]: {"refs": [], "last_modified": float(t)} for name, t in mtimes.items()}


def test_pitfall_superseded_revisions_fill_the_disk():
    # Three upgrades: A, B, C in the cache, D serves. With the default keep=1 only D stays.
    plan = superseded_revisions(cached(A=1, B=2, C=3, D=4), D, 1)
    assert plan["keep"] == [D]
    assert sorted(plan["prune"]) == [A, B, C]
    assert all(plan["why"][commit].startswith("superseded") for commit in (A, B, C))


def test_keep_two_keeps_the_served_revision_and_the_newest_other():
    plan = superseded_revisions(cached(A=1, B=3, C=2, D=4), D, 2)
    assert plan["keep"] == [D, B]
    assert plan["prune"] == [C, A]  # newest first


def test_the_served_revision_is_never_pruned_even_when_it_is_the_oldest():
    # A rollback to A: its blobs are the oldest in the cache, it serves, it stays.
    plan = superseded_revisions(cached(A=1, B=2, C=3), A, 1)
    assert plan["keep"] == [A]
    assert plan["prune"] == [C, B]


def test_pitfall_a_revision_a_running_container_has_mounted_is_never_pruned():
    # keep=1, but a container still runs B (mid-upgrade, or a unit the plan no longer knows): B stays.
    plan = superseded_revisions(cached(A=1, B=2, C=3), C, 1, in_use=[B])
    assert plan["keep"] == [C, B]
    assert plan["prune"] == [A]
    assert plan["why"][B] == "kept: a running container has it mounted"


def test_revisions_in_use_count_against_keep():
    plan = superseded_revisions(cached(A=1, B=2, C=3, D=4), D, 2, in_use=[A])
    assert plan["keep"] == [D, A]
    assert plan["prune"] == [C, B]


def test_the_last_served_revision_is_kept_before_a_newer_fetched_one():
    # Served A, upgraded to B, rolled back to A, now upgrading to C: a rollback goes back to A, not to B, although
    # B's blobs are newer. The prune's record of when each one served decides.
    plan = superseded_revisions(cached(A=1, B=2, C=3), C, 2, served={A: 300.0, B: 200.0})
    assert plan["keep"] == [C, A]
    assert plan["prune"] == [B]


def test_nothing_superseded_prunes_nothing():
    assert superseded_revisions(cached(A=1), A, 1)["prune"] == []
    assert superseded_revisions(cached(A=1, B=2), B, 2)["prune"] == []
    assert superseded_revisions({}, A, 1) == {"keep": [], "prune": [], "why": {}}


def test_a_served_revision_missing_from_the_cache_prunes_nothing():
    plan = superseded_revisions(cached(A=1, B=2), C, 1)
    assert plan["prune"] == []
    assert sorted(plan["keep"]) == [A, B]
    assert "is not in the cache" in plan["why"][A]


def test_a_snapshot_folder_that_is_no_commit_is_left_alone():
    plan = superseded_revisions({**cached(A=1, B=2), "main": {}}, B, 1)
    assert plan["prune"] == [A]
    assert "main" not in plan["keep"] and "not a commit" in plan["why"]["main"]


@pytest.mark.parametrize("keep", [0, -1, True, 1.5, "2", None])
def test_keep_must_be_an_integer_of_at_least_one(keep):
    with pytest.raises(ValueError, match="keep must be an integer of at least 1"):
        superseded_revisions(cached(A=1), A, keep)


def test_the_served_revision_must_be_a_commit():
    with pytest.raises(ValueError, match="40-hex commit"):
        superseded_revisions(cached(A=1), "main", 1)


def container(name, command, mounts=()):
    """One entry of the Docker API's container list, as docker_host_info returns it with verbose_output."""
    return {"Names": [f"/{name}"], "Command": command, "Mounts": [{"Source": s} for s in mounts], "State": "running"}


def test_revisions_in_use_reads_the_serving_command_and_snapshot_mounts():
    running = [
        # the replica unit: `vllm serve <container snapshot path>`, the whole cache mounted read-only
        container(
            "gb10-vllm",
            f"vllm serve /root/.cache/huggingface/hub/{FOLDER}/snapshots/{A} --port 8000",
            ["/var/lib/gb10/hf-cache"],
        ),
        # a snapshot folder mounted on its own
        container("other", "python3 serve.py /model", [f"/var/lib/gb10/hf-cache/hub/{FOLDER}/snapshots/{B}"]),
        # another model's snapshot, and a longer hex that is no commit of this model
        container("x", f"vllm serve /root/.cache/huggingface/hub/models--org--other/snapshots/{C}"),
        container("y", f"run /x/{FOLDER}/snapshots/{D}ff"),
    ]
    assert revisions_in_use(running, REPO) == {A: ["gb10-vllm"], B: ["other"]}
    assert revisions_in_use([], REPO) == {}


def test_the_filter_passes_what_is_in_use_and_what_goes():
    running = [container("gb10-vllm", f"vllm serve /root/.cache/huggingface/hub/{FOLDER}/snapshots/{B}")]
    plan = weights_prune_plan([A, B, C], C, 1, running, REPO)
    assert plan["in_use"] == {B: ["gb10-vllm"]}
    assert plan["why"][B] == "kept: a running container has it mounted (gb10-vllm)"
    assert plan["keep"] == [C, B] and plan["prune"] == [A]
    assert weights_prune_plan([C], C, 1, [], REPO)["prune"] == []
