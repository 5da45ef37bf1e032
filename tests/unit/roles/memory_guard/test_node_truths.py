# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/memory_guard reads back what the node runs (issue 19, item 7): vm.swappiness from /proc after the sysctl,
each protected unit's oom_score_adj after its restart; molecule's verify hands earlyoom_armed the node's values."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[4]
ROLE = REPO / "roles" / "memory_guard"


def tasks(name):
    return yaml.safe_load((ROLE / "tasks" / name).read_text())


def named(steps, words):
    return next(i for i, step in enumerate(steps) if words in step["name"])


def test_swappiness_is_read_from_proc_right_after_the_sysctl_and_judged():
    steps = tasks("configure.yml")
    sysctl = named(steps, "Set vm.swappiness")
    read = named(steps, "Read vm.swappiness back")
    assert read == sysctl + 1
    assert steps[read]["ansible.builtin.slurp"]["src"] == "/proc/sys/vm/swappiness"
    assert steps[read]["check_mode"] is False
    judge = steps[named(steps, "Judge the kernel")]["ansible.builtin.set_fact"]["__memory_guard_swappiness"]
    assert "memory_guard_swappiness_verdict" in judge and "memory_guard_sysctl_apply" in judge
    assert "assert" in str(steps[named(steps, "Require the kernel")]) and "debug" in str(steps[named(steps, "Say")])


def test_pitfall_earlyoom_checked_against_the_intended_swappiness():
    # The armed check judged the swap side at the value the role wrote; on a node whose kernel runs another one
    # (a read-only /proc/sys) that proved nothing. Both the role and molecule's verify hand the kernel's value.
    steps = tasks("service.yml")
    armed = steps[named(steps, "earlyoom's own startup lines")]["gb10.serving.earlyoom_armed"]
    assert armed["swappiness"].startswith("{{ __memory_guard_swappiness.kernel")
    verify = yaml.safe_load((REPO / "molecule" / "default" / "verify.yml").read_text())[0]["tasks"]
    read = verify[named(verify, "vm.swappiness and swap size from the kernel")]
    assert "/proc/sys/vm/swappiness" in read["loop"]
    checked = verify[named(verify, "earlyoom's own startup lines")]["gb10.serving.earlyoom_armed"]
    assert "__verify_kernel" in str(checked["swappiness"]) and "__verify_kernel" in str(checked["swap_total_mib"])


def test_protected_units_scores_are_read_after_their_restart():
    steps = tasks("service.yml")
    flush = named(steps, "Apply pending restarts")
    read = named(steps, "protected unit's main process runs at the protected score")
    assert flush < read < named(steps, "Require the score")
    protection = steps[read]["gb10.serving.oom_protection"]
    assert protection["units"] == "{{ memory_guard_protected_units }}"
    assert protection["required"] == "{{ memory_guard_oom_protect_required }}"


def test_the_simulation_accepts_unprotected_units_and_says_why():
    sim = yaml.safe_load((REPO / "inventories" / "sim" / "group_vars" / "all" / "sim.yml").read_text())
    assert sim["memory_guard_oom_protect_required"] is False and sim["memory_guard_sysctl_apply"] is False
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert defaults["memory_guard_oom_protect_required"] is True
