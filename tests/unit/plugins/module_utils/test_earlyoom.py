"""earlyoom arithmetic and log reading (seed 004 pitfall 1: an OOM killer that is installed but inert)."""

from pathlib import Path

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import _earlyoom

FIXTURES = Path(__file__).parents[2] / "fixtures" / "earlyoom"
GB10_MEM_MIB = 124608


def lines(name):
    return (FIXTURES / name).read_text().splitlines()


def test_pitfall_swappiness_zero_disarms_default_thresholds():
    """earlyoom's defaults (10,5 / 10,5) never fire when swappiness=0 keeps swap ~100 % free."""
    thresholds = _earlyoom.effective_thresholds(None, None)
    problems = _earlyoom.disarm_problems(thresholds, swappiness=0, swap_total_mib=16383)
    assert len(problems) == 2
    assert "SIGTERM waits for swap free <= 10.00%" in problems[0]
    assert "-s 100,100" in problems[0]


def test_pitfall_bare_m4_s100_halves_sigkill_swap_side():
    """`-m 4 -s 100` gives SIGKILL at swap <= 50 %, unreachable with swappiness 0: refused with the arithmetic."""
    thresholds = _earlyoom.effective_thresholds("4", "100")
    assert thresholds["SIGKILL"] == {"mem": 2.0, "swap": 50.0}
    problems = _earlyoom.disarm_problems(thresholds, swappiness=0, swap_total_mib=16383)
    assert len(problems) == 1
    assert problems[0].startswith("SIGKILL waits for swap free <= 50.00% AND mem <= 2.00%")


def test_pitfall_bare_m4_s100_read_from_earlyoom_18_log_is_not_armed():
    reported = _earlyoom.parse_startup(lines("v1.8_startup_bare_m4_s100.txt"))
    assert reported["version"] == "v1.8"
    intended = {"SIGTERM": {"mem": 4.0, "swap": 100.0}, "SIGKILL": {"mem": 2.0, "swap": 100.0}}
    problems = _earlyoom.armed_problems(reported, intended, swappiness=0, swap_total_mib=16383)
    assert "SIGKILL swap threshold is 50.00% in earlyoom's own log, intended 100.00%" in problems
    assert any("SIGKILL never fires" in p for p in problems)


def test_build_args_gives_both_values_explicitly_and_swap_always_true():
    built = _earlyoom.build_args(GB10_MEM_MIB, "4%", "2%", swappiness=0, swap_total_mib=16383)
    assert built["args"] == ["-r", "3600", "-m", "4,2", "-s", "100,100"]
    assert built["problems"] == []
    assert "~4.9 GiB of 124608 MiB" in built["arithmetic"]


def test_build_args_accepts_sizes_in_gib():
    built = _earlyoom.build_args(GB10_MEM_MIB, "4.9GiB", "2.5GiB", swappiness=0, swap_total_mib=0)
    assert built["args"][3] == "4.03,2.05"


def test_build_args_keeps_swap_thresholds_where_swap_can_fill():
    built = _earlyoom.build_args(GB10_MEM_MIB, "4%", "2%", swappiness=60, swap_total_mib=8192)
    assert built["args"][5] == "10,5"
    assert built["problems"] == []


def test_build_args_refuses_sigkill_above_sigterm():
    built = _earlyoom.build_args(GB10_MEM_MIB, "2%", "4%", swappiness=0, swap_total_mib=0)
    assert built["problems"] == ["SIGKILL threshold 4.00% is above SIGTERM's 2.00%: SIGKILL would fire first"]


@pytest.mark.parametrize("regex", [r"^(cudafe\+\+)", "'^(sshd)$'", "a b"])
def test_pitfall_environmentfile_mangles_regex_quotes_and_backslashes(regex):
    """systemd passes $EARLYOOM_ARGS split at spaces, quotes literal, backslashes eaten: refuse such regexes."""
    built = _earlyoom.build_args(GB10_MEM_MIB, "4%", "2%", swappiness=0, swap_total_mib=0, prefer=regex)
    assert any("prefer regex" in p for p in built["problems"])


@pytest.mark.parametrize("value", ["0%", "100%", "200GiB", "four"])
def test_threshold_out_of_range_or_unreadable(value):
    with pytest.raises(_earlyoom.ThresholdError):
        _earlyoom.threshold_percent(value, GB10_MEM_MIB)


def test_no_swap_counts_as_always_true():
    thresholds = _earlyoom.effective_thresholds("4,2", "10,5")
    assert _earlyoom.disarm_problems(thresholds, swappiness=0, swap_total_mib=0) == []


def test_parse_startup_v17_armed_with_prefer_and_avoid():
    reported = _earlyoom.parse_startup(lines("v1.7_startup_armed.txt"))
    assert reported["version"] == "v1.7"
    assert reported["thresholds"]["SIGKILL"] == {"mem": 2.0, "swap": 100.0}
    intended = {"SIGTERM": {"mem": 4.0, "swap": 100.0}, "SIGKILL": {"mem": 2.0, "swap": 100.0}}
    prefer = "^(VLLM::|ray::|raylet|vllm|cicc|cudafe[+][+]|ptxas|nvcc|ninja)"
    assert _earlyoom.armed_problems(reported, intended, 0, 16383, prefer=prefer) == []
    assert _earlyoom.armed_problems(reported, intended, 0, 16383, prefer="^(vllm)") != []


def test_pitfall_previous_run_lines_missing_thresholds_are_not_armed():
    """Only the current run's lines count; a run that has printed nothing yet is not proven armed."""
    reported = _earlyoom.parse_startup(["earlyoom v1.7"])
    intended = {"SIGTERM": {"mem": 4.0, "swap": 100.0}, "SIGKILL": {"mem": 2.0, "swap": 100.0}}
    problems = _earlyoom.armed_problems(reported, intended, 0, 0)
    assert len(problems) == 2


def test_pitfall_compilation_terminated_is_a_kill_named_in_earlyoom_log():
    """A bare 'Compilation terminated.' is a signal; earlyoom's journal names the compiler it killed."""
    assert _earlyoom.kills(lines("v1.7_kill_cicc.txt")) == [("SIGTERM", 1848676, "cicc")]


# Issue 19, item 7: the node's truths read back, not the values the role wrote.
SYSCTL = "/etc/sysctl.d/90-gb10-memory-guard.conf"
CAPBND_ALL = "Name:\tsystemd\nCapBnd:\t000001ffffffffff\n"
CAPBND_NO_SYS_RESOURCE = f"Name:\tsystemd\nCapBnd:\t{0x1FFFFFFFFFF & ~(1 << 24):016x}\n"


def test_swappiness_applied_and_read_back_the_same():
    verdict = _earlyoom.swappiness_verdict("spark-1", "0\n", 0, True, SYSCTL)
    assert verdict["ok"] and verdict["kernel"] == 0 and "the kernel runs 0, as" in verdict["msg"]


def test_swappiness_applied_but_the_kernel_runs_another_value_fails_with_both_and_the_fix():
    verdict = _earlyoom.swappiness_verdict("spark-1", "60\n", 0, True, SYSCTL)
    assert not verdict["ok"] and verdict["kernel"] == 60
    assert verdict["msg"].startswith("spark-1: vm.swappiness is 60 in the kernel")
    assert f"{SYSCTL} (0)" in verdict["msg"] and "grep -rn swappiness" in verdict["msg"]


def test_pitfall_swappiness_not_applied_is_said_plainly_with_the_kernels_value():
    # molecule's verify handed earlyoom_armed `swappiness: 0` while a simulated node's read-only /proc/sys kept the
    # host's 60: the check judged a value the node did not run. Not applied is said, and the kernel's value used.
    verdict = _earlyoom.swappiness_verdict("spark-2", "60\n", 0, False, SYSCTL)
    assert verdict["ok"] and verdict["kernel"] == 60
    assert verdict["msg"].startswith("vm.swappiness not applied on spark-2: the kernel runs 60, the file says 0")


def test_capability_bounding_set_tells_whether_the_node_may_lower_scores():
    assert _earlyoom.capability_in_bounding_set(CAPBND_ALL) is True
    assert _earlyoom.capability_in_bounding_set(CAPBND_NO_SYS_RESOURCE) is False
    assert _earlyoom.capability_in_bounding_set("Name:\tx\n") is None


def test_oom_score_applied():
    verdict = _earlyoom.oom_protection_verdict("spark-1", "ssh.service", 812, "-1000\n", CAPBND_ALL, True)
    assert verdict == {
        "applied": True,
        "ok": True,
        "score": -1000,
        "msg": "ssh.service on spark-1: OOMScoreAdjust=-1000 applied (main process 812: oom_score_adj -1000)",
    }


def test_pitfall_oom_score_refused_without_cap_sys_resource_is_not_applied_with_the_reason():
    # An unprivileged container cannot take a negative score; systemd starts sshd at 0 all the same.
    accepted = _earlyoom.oom_protection_verdict("spark-1", "ssh.service", 812, "0\n", CAPBND_NO_SYS_RESOURCE, False)
    assert accepted["ok"] and not accepted["applied"] and accepted["score"] == 0
    assert "OOMScoreAdjust=-1000 not applied" in accepted["msg"] and "lacks CAP_SYS_RESOURCE" in accepted["msg"]
    assert "memory_guard_oom_protect_required is false" in accepted["msg"]
    refused = _earlyoom.oom_protection_verdict("spark-1", "ssh.service", 812, "0\n", CAPBND_NO_SYS_RESOURCE, True)
    assert not refused["ok"] and "Fix: give the node CAP_SYS_RESOURCE" in refused["msg"]


def test_oom_score_not_applied_on_a_node_that_may_lower_scores_fails_where_required():
    verdict = _earlyoom.oom_protection_verdict("spark-1", "ssh.service", 812, "0\n", CAPBND_ALL, True)
    assert not verdict["ok"] and "although the node may lower scores" in verdict["msg"]
    gone = _earlyoom.oom_protection_verdict("spark-1", "ssh.service", 0, "", CAPBND_ALL, True)
    assert not gone["ok"] and gone["score"] is None and "no main process to read" in gone["msg"]
