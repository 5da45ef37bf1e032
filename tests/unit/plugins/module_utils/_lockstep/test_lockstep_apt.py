# Copyright: gb10.serving maintainers
# Apache-2.0
"""What a failed or simulated apt-get printed (_lockstep/apt.py), on captured transcripts."""

from __future__ import annotations

from _lockstep_fixtures import fixture

from ansible_collections.gb10.serving.plugins.module_utils._lockstep.apt import apt_failure_text, simulated_moves

# Issue 19 item 8 (a failure between install and hold): the operator's message must name what failed. Captured:
# dpkg's error is on apt-get's stdout, behind the transcript; stderr holds only apt's E: line.
APT_STDOUT = fixture("apt_install_postinst_fails.stdout")

APT_STDERR = fixture("apt_install_postinst_fails.stderr")

# Two sources with one version at other hashes (a node image's repository beside another build of it): apt adds a
# W: line per package, after dpkg's run (seen in make test's nvidia_lockstep scenario, 2026-12-01).
DISAGREE = "".join(
    f"W: Sources disagree on hashes for supposedly identical version '6.17.0-1015.15' of '{name}:amd64'.\n"
    for name in ("linux-nvidia-hwe-24.04", "linux-image-nvidia-hwe-24.04", "linux-headers-nvidia-hwe-24.04") * 4
)


def test_pitfall_failed_install_message_names_the_failing_package():
    text = apt_failure_text(APT_STDOUT, APT_STDERR)
    assert text.startswith("dpkg: error processing package gb10-sim-postinst-fails (--configure):")
    assert "post-installation script subprocess returned error exit status 1" in text
    assert text.endswith("E: Sub-process /usr/bin/dpkg returned an error code (1)")
    assert "Unpacking" not in text and "debconf" not in text


def test_pitfall_failed_install_message_survives_apt_warnings():
    plain_tail = (APT_STDERR + DISAGREE)[-800:]
    assert "gb10-sim-postinst-fails" not in plain_tail  # what the role's message held before
    text = apt_failure_text(APT_STDOUT, APT_STDERR + DISAGREE)
    assert "Errors were encountered while processing:\n gb10-sim-postinst-fails" in text
    assert "W: " not in text


def test_apt_failure_before_dpkg_ran_is_apt_stderr_else_msg():
    refused = "E: Version '9.9' for 'nvidia-driver-580-open' was not found\n"
    assert apt_failure_text("Reading package lists...\n", DISAGREE + refused) == refused.strip()
    assert apt_failure_text(None, None, "no package matching") == "no package matching"
    assert len(apt_failure_text(APT_STDOUT, APT_STDERR, limit=50)) == 50


def test_pitfall_rollback_to_an_older_set_is_seen_as_a_move():
    """Found by the driver-change rolling upgrade back to set A: under set C's 1001 pins the apt module's check mode
    answered "no available installation candidate" and the node was taken as already on its set."""
    moves = simulated_moves(fixture("apt_simulate_back_under_newer_pins.stdout"))
    by_name = {move["package"]: move for move in moves}
    assert len(moves) == 7
    assert by_name["nvidia-driver-580-open"] == {
        "package": "nvidia-driver-580-open",
        "action": "install",
        "installed": "580.150-0ubuntu0.24.04.1",
        "target": "580.142-0ubuntu0.24.04.1",
    }
    assert by_name["linux-nvidia-hwe-24.04"]["installed"] is None
    assert by_name["linux-nvidia-hwe-24.04"]["target"] == "6.17.0-1014.14"


def test_set_in_place_moves_nothing():
    assert simulated_moves(fixture("apt_simulate_unchanged.stdout")) == []
    assert simulated_moves("") == []


def test_removal_is_a_move():
    line = "Remv linux-image-6.17.0-1015-nvidia [6.17.0-1015.15]"
    assert simulated_moves(line) == [
        {"package": "linux-image-6.17.0-1015-nvidia", "action": "remove", "installed": "6.17.0-1015.15", "target": None}
    ]


def test_pitfall_unpublished_version_is_named_in_the_refusal():
    result = {
        "rc": 100,
        "stdout": fixture("apt_simulate_unpublished.stdout"),
        "stderr": fixture("apt_simulate_unpublished.stderr"),
    }
    text = apt_failure_text(result["stdout"], result["stderr"])
    assert text == "E: Version '580.999-0ubuntu0.24.04.1' for 'nvidia-driver-580-open' was not found"
    assert simulated_moves(result["stdout"]) == []
