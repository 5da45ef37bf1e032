# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 37, item 4: every role variable roles/nvidia_lockstep writes into its templates (the apt preferences file's
package names, versions and priority; the phasing file holds none) is checked by the preflight's one-word check
(roles/nvidia_lockstep/tasks/preflight.yml, the role's own task run here by the real ansible-playbook) before apt
resolves the set and before anything on the node changes. Each is tried with a line break and a quote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from task_file_runner import run_task_file
from template_words import public_variables as role_public_variables
from template_words import refusal

ROLE = Path(__file__).resolve().parents[4] / "roles" / "nvidia_lockstep"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
ROLE_VARS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
CHECK = "Refuse a value the apt preferences file could not hold as one word"
BAD = {"a line break": "\n\nPackage: *\nPin: release a=evil\nPin-Priority: 1001", "a quote": '"'}
# The public variables the preferences file is written with, through the role's vars/main.yml (the package set).
CHECKED = [
    "nvidia_lockstep_driver_branch",
    "nvidia_lockstep_driver_variant",
    "nvidia_lockstep_kernel_abi",
    "nvidia_lockstep_kernel_flavour",
    "nvidia_lockstep_meta_flavour",
    "nvidia_lockstep_kernel_version",
    "nvidia_lockstep_modules_version",
    "nvidia_lockstep_driver_version",
    "nvidia_lockstep_pin_priority",
]


def check(tmp_path, **given):
    """(rc, output) of the preflight's one-word check, the role's own task, on localhost with the role's defaults."""
    tasks = yaml.safe_load((ROLE / "tasks" / "preflight.yml").read_text())
    task = next(t for t in tasks if t["name"] == CHECK)
    tasks_file = tmp_path / "check.yml"
    tasks_file.write_text(json.dumps([task]))
    return run_task_file(tmp_path, tasks_file, {**DEFAULTS, **given}, name="The one-word check")


def public_variables(source):
    """The role's public variables ``source`` reads, directly or through vars/main.yml (template_words.py)."""
    return role_public_variables(source, ROLE_VARS, ("nvidia_lockstep_",))


def test_pitfall_newline_in_a_version_adds_a_pin_of_its_own(tmp_path):
    version = DEFAULTS["nvidia_lockstep_driver_version"] + BAD["a line break"]
    rc, out = check(tmp_path, nvidia_lockstep_driver_version=version)
    assert rc == 2, out[-3000:]
    msg = refusal(out)
    assert msg.startswith(f"localhost: nvidia_lockstep_driver_version is {json.dumps(version)}; set an exact"), msg
    assert "e.g. 580.142-0ubuntu0.24.04.1" in msg


@pytest.mark.parametrize("kind", sorted(BAD))
def test_each_variable_the_preferences_file_is_written_with_refuses_a_line_break_and_a_quote(tmp_path, kind):
    given = {name: f"{DEFAULTS[name]}{BAD[kind]}" for name in CHECKED}
    given["nvidia_lockstep_extra_packages"] = {"gb10-extra": "1.0" + BAD[kind], f"gb10-x{BAD[kind]}": "1.0"}
    rc, out = check(tmp_path, **given)
    assert rc == 2, out[-3000:]
    msg = refusal(out)
    assert msg.startswith("localhost: "), msg
    for name in CHECKED:
        assert f"{name} is {json.dumps(given[name])}; set " in msg, msg
    assert f'nvidia_lockstep_extra_packages["gb10-extra"] is {json.dumps("1.0" + BAD[kind])}; set ' in msg, msg
    assert f"nvidia_lockstep_extra_packages key {json.dumps('gb10-x' + BAD[kind])} is no package name" in msg, msg


def test_a_trailing_line_break_in_the_priority_is_refused_though_argument_specs_take_it(tmp_path):
    rc, out = check(tmp_path, nvidia_lockstep_pin_priority="1001\n", nvidia_lockstep_kernel_abi="6.17.0-1014\n")
    assert rc == 2, out[-3000:]
    msg = refusal(out)
    assert 'nvidia_lockstep_pin_priority is "1001\\n"; set a whole number, e.g. 1001' in msg
    assert 'nvidia_lockstep_kernel_abi is "6.17.0-1014\\n"' in msg


def test_values_at_the_edge_of_the_patterns_pass(tmp_path):
    rc, out = check(tmp_path, nvidia_lockstep_driver_variant="", nvidia_lockstep_pin_priority=-10)
    assert rc == 0, out[-3000:]
    rc, out = check(
        tmp_path,
        nvidia_lockstep_driver_variant="server-open",
        nvidia_lockstep_kernel_version="1:6.17.0-1014.14~24.04.1+b2",
        nvidia_lockstep_meta_flavour="nvidia-6.17+hwe.24.04",
        nvidia_lockstep_extra_packages={"gb10-sim-postinst-fails": "1.0", "libfoo++2": "2:1.0~rc1-0ubuntu1"},
    )
    assert rc == 0, out[-3000:]


def test_every_variable_a_template_writes_is_checked():
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    written = public_variables((ROLE / "templates" / "nvidia-lockstep.pref.j2").read_text())
    assert written == {*CHECKED, "nvidia_lockstep_extra_packages"}
    assert public_variables((ROLE / "templates" / "nvidia-lockstep-phasing.conf.j2").read_text()) == set()
    tasks = yaml.safe_load((ROLE / "tasks" / "preflight.yml").read_text())
    assert next(t for t in tasks if t["name"] == CHECK) is tasks[0], "checked before apt resolves the set"
    assert [word[0] for word in tasks[0]["vars"]["__nvidia_lockstep_words"]] == CHECKED
    assert "nvidia_lockstep_extra_packages | dictsort" in tasks[0]["vars"]["__nvidia_lockstep_word_problems"]
    for name in written:
        assert specs[name]["type"] in ("str", "int", "dict"), name
    assert sorted(p.name for p in (ROLE / "templates").iterdir()) == [
        "nvidia-lockstep-phasing.conf.j2",
        "nvidia-lockstep.pref.j2",
    ]
