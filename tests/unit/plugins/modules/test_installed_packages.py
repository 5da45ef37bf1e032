# Copyright: gb10.serving maintainers
# Apache-2.0
"""The installed_packages module against the real dpkg-query, on a dpkg database of its own (--admindir)."""

from __future__ import annotations

import importlib
import shutil

import pytest
from module_harness import run_main

basic = importlib.import_module("ansible.module_utils.basic")
installed_packages = importlib.import_module("ansible_collections.gb10.serving.plugins.modules.installed_packages")

pytestmark = pytest.mark.skipif(not shutil.which("dpkg-query"), reason="needs dpkg-query (Debian's own)")

REAL_RUN_COMMAND = basic.AnsibleModule.run_command


def stanza(name, status, version="1.0", architecture="all", extra=""):
    return (
        f"Package: {name}\nStatus: {status}\nPriority: optional\nSection: misc\nInstalled-Size: 1\n"
        f"Maintainer: t <t@example.org>\nArchitecture: {architecture}\n{extra}Version: {version}\nDescription: x\n"
    )


def run(admindir, check=False):
    args = {"admindir": str(admindir), "_ansible_check_mode": check}
    return run_main(installed_packages.main, args, REAL_RUN_COMMAND)


def database(tmp_path, *stanzas):
    (tmp_path / "updates").mkdir()
    (tmp_path / "info").mkdir()
    (tmp_path / "available").write_text("")
    (tmp_path / "status").write_text("\n".join(stanzas))
    return tmp_path


def test_installed_packages_with_their_versions_epoch_included(tmp_path):
    admindir = database(
        tmp_path,
        stanza("nvidia-driver-580-open", "hold ok installed", "580.95.05-0ubuntu1"),
        stanza("earlyoom", "install ok installed", "1.7-1"),
        stanza("libc6", "install ok installed", "2.36-9", "arm64", "Multi-Arch: same\n"),
        stanza("gnupg", "install ok triggers-pending", "2.2.40-1.1", extra="Triggers-Pending: ldconfig\n"),
        stanza("sudo", "install ok installed", "1:1.9.13p3-1"),
    )
    result = run(admindir)
    assert not result["failed"], result
    assert result["changed"] is False
    assert result["packages"] == {
        "nvidia-driver-580-open": "580.95.05-0ubuntu1",
        "earlyoom": "1.7-1",
        "libc6": "2.36-9",
        "gnupg": "2.2.40-1.1",
        "sudo": "1:1.9.13p3-1",
    }


def test_removed_or_half_installed_packages_are_not_installed(tmp_path):
    # An apt task skipped for a package dpkg only remembers would leave it missing: none of these counts.
    admindir = database(
        tmp_path,
        stanza("haproxy", "deinstall ok config-files", "2.6.12-1"),
        stanza("keepalived", "install reinstreq half-installed", "1:2.2.7-1"),
        stanza("socat", "install ok unpacked", "1.7.4.4-2"),
        stanza("curl", "install ok installed", "7.88.1-10"),
    )
    assert run(admindir)["packages"] == {"curl": "7.88.1-10"}


def test_check_mode_reads_the_same(tmp_path):
    admindir = database(tmp_path, stanza("earlyoom", "install ok installed", "1.7-1"))
    assert run(admindir, check=True)["packages"] == {"earlyoom": "1.7-1"}


def test_this_machines_own_database_agrees_with_dpkg(tmp_path):
    # The real /var/lib/dpkg of the machine running the tests: dpkg-query's own status of a package it has.
    result = run("/var/lib/dpkg")
    assert result["packages"].get("dpkg"), "dpkg itself is installed wherever dpkg-query runs"


def test_a_failed_read_says_why(tmp_path):
    admindir = database(tmp_path, "Package: broken\nStatus: install ok triggers-pending\nVersion: 1\n")
    result = run(admindir)
    assert result["failed"] and "dpkg-query -W failed on this node (rc 2)" in result["msg"]
