# Copyright: gb10.serving maintainers
# Apache-2.0
"""The package_holds module against the real dpkg and dpkg-query, on a dpkg database of its own (--admindir)."""

from __future__ import annotations

import importlib
import shutil
import subprocess

import pytest
from module_harness import run_main

basic = importlib.import_module("ansible.module_utils.basic")
package_holds = importlib.import_module("ansible_collections.gb10.serving.plugins.modules.package_holds")

pytestmark = pytest.mark.skipif(not shutil.which("dpkg"), reason="needs dpkg (Debian's own, as on every node)")

DRIVER = "nvidia-driver-580-open"
IMAGE = "linux-image-6.17.0-1014-nvidia"
REAL_RUN_COMMAND = basic.AnsibleModule.run_command


def stanza(name, status, version="1.0"):
    return (
        f"Package: {name}\nStatus: {status}\nPriority: optional\nSection: misc\nInstalled-Size: 1\n"
        f"Maintainer: t <t@example.org>\nArchitecture: all\nVersion: {version}\nDescription: x\n"
    )


@pytest.fixture
def admindir(tmp_path):
    """A dpkg database: the driver installed and not held, the kernel image held, one package only configured."""
    (tmp_path / "updates").mkdir()
    (tmp_path / "info").mkdir()
    (tmp_path / "available").write_text("")
    (tmp_path / "status").write_text(
        "\n".join(
            [
                stanza(DRIVER, "install ok installed", "580.95.05-0ubuntu1"),
                stanza(IMAGE, "hold ok installed", "6.17.0-1014.14"),
                stanza("only-config", "deinstall ok config-files"),
            ]
        )
    )
    return tmp_path


def selections(admindir):
    out = subprocess.run(
        ["dpkg-query", f"--admindir={admindir}", "-W", "-f=${Package} ${Status}\n"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {line.split()[0]: line.split()[1] for line in out.splitlines()}


def run(admindir, check=False, diff=False, **args):
    args = {"admindir": str(admindir), "_ansible_check_mode": check, "_ansible_diff": diff, **args}
    return run_main(package_holds.main, args, REAL_RUN_COMMAND)


def test_holds_what_is_not_held_in_one_call_then_changes_nothing(admindir):
    first = run(admindir, names=[DRIVER, IMAGE])
    assert first["changed"] and first["changed_packages"] == [DRIVER]
    assert selections(admindir)[DRIVER] == "hold" and selections(admindir)[IMAGE] == "hold"
    again = run(admindir, names=[DRIVER, IMAGE])
    assert not again["changed"] and again["changed_packages"] == []


def test_check_mode_reports_the_change_and_sets_nothing(admindir):
    result = run(admindir, check=True, diff=True, names=[DRIVER, IMAGE])
    assert result["changed"] and result["changed_packages"] == [DRIVER]
    assert result["diff"] == {"before": f"{DRIVER} install\n", "after": f"{DRIVER} hold\n"}
    assert selections(admindir)[DRIVER] == "install"


def test_release_marks_install(admindir):
    result = run(admindir, names=[IMAGE], held=False)
    assert result["changed_packages"] == [IMAGE]
    assert selections(admindir)[IMAGE] == "install"


def test_a_package_dpkg_does_not_have_fails_before_anything_is_set(admindir):
    result = run(admindir, names=[DRIVER, "linux-modules-nvidia-580-open-6.17.0-1014-nvidia", "only-config"])
    assert result["failed"]
    assert "linux-modules-nvidia-580-open-6.17.0-1014-nvidia, only-config" in result["msg"]
    assert result["unknown"] == ["linux-modules-nvidia-580-open-6.17.0-1014-nvidia", "only-config"]
    assert selections(admindir)[DRIVER] == "install"


def test_check_mode_counts_a_package_not_installed_yet_as_one_to_hold(admindir):
    # The install before the hold was simulated (check mode): a real run installs it, then holds it.
    modules = "linux-modules-nvidia-580-open-6.17.0-1014-nvidia"
    result = run(admindir, check=True, diff=True, names=[modules, DRIVER, IMAGE])
    assert not result.get("failed"), result
    assert result["changed"] and result["changed_packages"] == [modules, DRIVER]
    assert any("not installed yet" in warning for warning in result["warnings_emitted"]), result
    assert selections(admindir)[DRIVER] == "install" and modules not in selections(admindir)
