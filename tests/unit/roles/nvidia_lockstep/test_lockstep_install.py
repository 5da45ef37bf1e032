# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/nvidia_lockstep installs the set in the order pin, install, hold, and a failure at any step puts back the
pins and the holds the node had before (issue 19 item 8): no new set is ever left unheld under old pins."""

from __future__ import annotations

from pathlib import Path

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.gb10.serving.plugins.filter.nvidia_lockstep import nvidia_lockstep_apt_failure

ROOT = Path(__file__).resolve().parents[4]
ROLE = ROOT / "roles" / "nvidia_lockstep"


def _tasks(name):
    return yaml.safe_load((ROLE / "tasks" / name).read_text())


def _trusted(value):
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [_trusted(v) for v in value]
    if isinstance(value, dict):
        return {k: _trusted(v) for k, v in value.items()}
    return value


def _role_vars(**overrides):
    role_vars = {
        **yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()),
        **yaml.safe_load((ROLE / "vars" / "main.yml").read_text()),
    }
    variables = _trusted(role_vars)
    variables.update(overrides)
    return Templar(loader=DataLoader(), variables=variables)


def _module(task):
    return next(k for k in task if k.startswith(("ansible.builtin.", "gb10.serving.")))


def test_pitfall_lockstep_pin_install_hold_with_a_rescue_that_puts_the_old_pins_and_holds_back():
    tasks = _tasks("install.yml")
    reads = [_module(t) for t in tasks[:2]]
    assert reads == ["ansible.builtin.command", "ansible.builtin.slurp"]
    assert tasks[0]["ansible.builtin.command"]["cmd"] == "apt-mark showhold"
    assert all(t["check_mode"] is False for t in tasks[:2])
    block = tasks[2]
    steps = [_module(t) for t in block["block"]]
    # pin (configure.yml: the preferences template), then install, then hold
    assert steps == ["ansible.builtin.import_tasks", "ansible.builtin.apt", "gb10.serving.package_holds"]
    assert block["block"][0]["ansible.builtin.import_tasks"] == "configure.yml"
    configure = _tasks("configure.yml")
    # the pins first, in the same node_templates run as the phasing setting
    files = configure[0]["gb10.serving.node_templates"]["files"]
    assert files.index("'nvidia-lockstep.pref.j2'") < files.index("'nvidia-lockstep-phasing.conf.j2'")
    rescue = [_module(t) for t in block["rescue"]]
    assert rescue == ["ansible.builtin.copy", "ansible.builtin.file", "ansible.builtin.command", "ansible.builtin.fail"]
    restore = block["rescue"][2]["ansible.builtin.command"]
    assert restore["argv"] == ["dpkg", "--set-selections"]
    message = block["rescue"][3]["ansible.builtin.fail"]["msg"]
    for words in ("inventory_hostname", "ansible_failed_task.name", "run the same command again", "not restarted"):
        assert words in message


def test_main_pins_installs_and_holds_in_one_step_before_verify():
    names = [t["ansible.builtin.import_tasks"] for t in _tasks("main.yml")]
    assert names == ["preflight.yml", "install.yml", "verify.yml"]


def test_restore_selections_hold_the_previous_holds_and_release_what_this_run_held():
    before = {"stdout_lines": ["linux-image-6.17.0-1014-nvidia", "nvidia-driver-580-open", ""]}
    templar = _role_vars(__nvidia_lockstep_held_before=before)
    lines = templar.template(trust_as_template("{{ _nvidia_lockstep_restore_selections }}")).splitlines()
    assert lines[:2] == ["linux-image-6.17.0-1014-nvidia hold", "nvidia-driver-580-open hold"]
    released = lines[2:]
    assert "nvidia-driver-580-open install" not in released
    assert "linux-modules-nvidia-580-open-6.17.0-1014-nvidia install" in released
    assert "nvidia-dkms-580-open install" in released
    assert all(line.endswith(" install") for line in released)


def test_restore_selections_with_nothing_held_before_release_the_whole_set():
    templar = _role_vars(__nvidia_lockstep_held_before={"stdout_lines": []})
    lines = templar.template(trust_as_template("{{ _nvidia_lockstep_restore_selections }}")).splitlines()
    assert len(lines) == 12 and all(line.endswith(" install") for line in lines)


def test_the_set_pins_the_dkms_package_with_the_driver():
    # fixtures/apt_unmet_deps_nvidia-hwe-24.04_dgx-spark.txt: nvidia-driver-580-open Depends nvidia-dkms-580-open
    # (<= 580.95.05-1); an older dkms satisfies a newer driver unless the set pins it.
    templar = _role_vars()
    specs = templar.template(trust_as_template("{{ _nvidia_lockstep_package_specs }}"))
    assert "nvidia-dkms-580-open=580.142-0ubuntu0.24.04.1" in specs
    assert "nvidia-driver-580-open=580.142-0ubuntu0.24.04.1" in specs
    assert len(specs) == 12


def test_sim_restart_records_the_next_boot_kernel_where_the_running_kernel_is_read():
    sim = yaml.safe_load((ROOT / "inventories" / "sim" / "group_vars" / "all" / "sim.yml").read_text())
    path = "/var/lib/gb10-sim/booted-kernel"
    assert sim["upgrade_node_restart"] == "command"
    assert sim["upgrade_node_restart_command"][:2] == ["/bin/sh", "-c"]
    assert path in sim["upgrade_node_restart_command"][2]
    assert "sort -V | tail -n 1" in sim["upgrade_node_restart_command"][2]
    running = sim["nvidia_lockstep_running_kernel"]
    assert path in running and "6.17.0-1014-nvidia" in running


def test_failure_message_names_the_node_the_step_dpkg_s_error_and_how_to_resume():
    rescue = _tasks("install.yml")[2]["rescue"]
    # The collection's filter is called here as its own function: a bare Templar has no collection loader (one
    # installed after the unit tests imported ansible_collections as a package does not find it either).
    filtered = "ansible_failed_result | gb10.serving.nvidia_lockstep_apt_failure"
    message = rescue[3]["ansible.builtin.fail"]["msg"]
    assert filtered in message
    message = message.replace(filtered, "__apt_failure")
    # As apt-get gives them (tests/unit/fixtures/lockstep/apt_install_postinst_fails.*): dpkg's error on stdout.
    fixtures = ROOT / "tests" / "unit" / "fixtures" / "lockstep"
    stdout = (fixtures / "apt_install_postinst_fails.stdout").read_text()
    stderr = (fixtures / "apt_install_postinst_fails.stderr").read_text()
    result = {"msg": "'/usr/bin/apt-get -y install ...' failed: " + stderr, "stderr": stderr, "stdout": stdout}
    templar = _role_vars(
        inventory_hostname="spark-1",
        ansible_failed_task={"name": "Install exactly the pinned kernel, modules and driver versions"},
        ansible_failed_result=result,
        __nvidia_lockstep_pins_before={"content": "UGluOiB4Cg=="},
        __nvidia_lockstep_held_before={"stdout_lines": ["nvidia-driver-580-open", "nvidia-kernel-common-580"]},
        __apt_failure=nvidia_lockstep_apt_failure(result),
    )
    text = " ".join(templar.template(trust_as_template(message)).split())
    assert text.startswith("nvidia_lockstep on spark-1: 'Install exactly the pinned kernel, modules and driver")
    assert "post-installation script subprocess returned error exit status 1" in text
    assert "'/usr/bin/apt-get" not in text
    assert "previous preferences file (restored)" in text and "the previous holds (2 package(s))" in text
    assert "the node was not restarted" in text and "run the same command again" in text
    # Going back: the target's linux-* packages (metapackages included, or apt refuses: they are held) go first.
    assert "purge --allow-change-held-packages linux-nvidia-hwe-24.04 linux-image-nvidia-hwe-24.04" in text
    assert "linux-modules-nvidia-580-open-6.17.0-1014-nvidia), then run with the previous set's" in text
