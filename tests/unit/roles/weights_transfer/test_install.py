# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/weights_transfer owns the node-side transfer program that model_weights and flashinfer_jit install (issue 41
item 3): each includes it with its own state folder, the folder its throwaway containers mount, and no role reads
another role's files by path."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[4]
ROLES = REPO / "roles"


def tasks(path):
    return yaml.safe_load((ROLES / path).read_text())


def includes(path):
    return [
        t
        for t in tasks(path)
        if t.get("ansible.builtin.include_role", {}).get("name") == "gb10.serving.weights_transfer"
    ]


def test_the_program_lives_in_its_own_role_only():
    assert (ROLES / "weights_transfer/files/weights_transfer.py").is_file()
    assert sorted(p.relative_to(ROLES).as_posix() for p in ROLES.glob("*/files/weights_transfer.py")) == [
        "weights_transfer/files/weights_transfer.py"
    ]


def test_install_puts_the_script_and_the_whole_package_in_the_callers_folder_in_one_module_run():
    # the _weights folder too: node_files makes it, or sets its mode, owner and group, with the files
    (install,) = tasks("weights_transfer/tasks/install.yml")
    run = install["gb10.serving.node_files"]
    assert run["src"] == ["weights_transfer.py", "{{ role_path }}/../../plugins/module_utils/_weights"]
    assert run["dest"] == "{{ weights_transfer_dest }}"
    assert run["directory_mode"] == run["mode"] == "{{ weights_transfer_mode }}"
    defaults = yaml.safe_load((ROLES / "weights_transfer/defaults/main.yml").read_text())
    assert defaults == {"weights_transfer_mode": "0700"}


def test_each_caller_includes_it_with_the_folder_its_containers_mount():
    (weights,) = includes("model_weights/tasks/configure.yml")
    assert weights["ansible.builtin.include_role"]["tasks_from"] == "install"
    assert weights["vars"] == {"weights_transfer_dest": "{{ model_weights_state_dir }}"}
    (jit,) = includes("flashinfer_jit/tasks/install.yml")
    assert jit["ansible.builtin.include_role"]["tasks_from"] == "install"
    assert jit["vars"] == {"weights_transfer_dest": "{{ flashinfer_jit_share_state_dir }}"}
    assert jit["when"] == "flashinfer_jit_share | bool"
    # The containers run it from the folder they mount, as before.
    assert "/gb10-weights/weights_transfer.py" in (ROLES / "model_weights/tasks/transfer.yml").read_text()
    assert (
        "_flashinfer_jit_share_mount ~ '/weights_transfer.py'"
        in (ROLES / "flashinfer_jit/tasks/receive.yml").read_text()
    )


def test_no_role_reads_another_roles_files_by_path():
    # role_path/../<role>/ reaches into a sibling role; role_path/../../plugins is the collection's own tree.
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for path in ROLES.rglob("*.yml")
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"role_path\s*}}/\.\./(?!\.\./)", line)
    ]
    assert found == []
