# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 37, item 4: every role variable roles/fabric_firewall writes into its templates is checked before configure
writes them. The nftables table and the unit's Before= are the plan's (its exposure table and unit names, checked
by the plan's rules); of the role's own, fabric_firewall_verdict has choices and is only compared, and
fabric_firewall_file, written bare into gb10-fabric-firewall.service's ExecStart=, is refused by the role's preflight
(run here by the real ansible-playbook) unless it is one word of the unit's command line: tried with a line break and
a quote."""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import jinja2.meta
import pytest
import yaml
from task_file_runner import run_role_tasks
from template_words import refusal

ROLE = Path(__file__).resolve().parents[4] / "roles" / "fabric_firewall"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
CHECK = "Refuse a value gb10-fabric-firewall.service could not hold as one word"
BAD = {"a line break": "\nExecStartPost=/tmp/evil", "a quote": '"', "a space": " /tmp/evil.nft", "a %": "%h"}
# What each template is written with, of the role's public variables (test_every_variable_... proves it complete).
TEMPLATE_VARIABLES = {
    "fabric-firewall.nft.j2": {"fabric_firewall_verdict"},
    "gb10-fabric-firewall.service.j2": {"fabric_firewall_file"},
}
CHECKED = ["fabric_firewall_file"]


def preflight(tmp_path, **given):
    """(rc, output) of the role's tasks/preflight.yml on localhost, with a plan whose exposure table fences nothing."""
    variables = {"gb10_plan": {"exposure": {"localhost": []}}, **given}
    return run_role_tasks(tmp_path, "fabric_firewall", "preflight", variables, name="The role's preflight")


def template_variables(template):
    parsed = jinja2.Environment().parse((ROLE / "templates" / template).read_text())
    return {n for n in jinja2.meta.find_undeclared_variables(parsed) if n.startswith("fabric_firewall_")}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_fabric_firewall_file_refuses_a_line_break_a_quote_a_space_and_a_specifier(tmp_path, kind):
    value = DEFAULTS["fabric_firewall_file"] + BAD[kind]
    rc, out = preflight(tmp_path, fabric_firewall_file=value)
    assert rc == 2, out[-3000:]
    msg = refusal(out)
    assert msg.startswith(f"localhost: fabric_firewall_file is {json.dumps(value)}; set an absolute node path"), msg
    assert "e.g. /etc/gb10/fabric-firewall.nft" in msg


def test_a_trailing_line_break_and_a_relative_path_are_refused(tmp_path):
    for value in ("/etc/gb10/fabric-firewall.nft\n", "fabric-firewall.nft"):
        rc, out = preflight(tmp_path, fabric_firewall_file=value)
        assert rc == 2, out[-3000:]
        assert f"fabric_firewall_file is {json.dumps(value)}" in refusal(out)


@pytest.mark.parametrize("value", [DEFAULTS["fabric_firewall_file"], "/srv/gb10_2/fabric-firewall.v2+site@a=b,c:d.nft"])
def test_values_at_the_edge_of_the_pattern_pass(tmp_path, value):
    rc, out = preflight(tmp_path, fabric_firewall_file=value, fabric_firewall_verdict="drop")
    assert rc == 0, out[-3000:]


def test_every_variable_a_template_writes_is_checked():
    specs = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    tasks = yaml.safe_load((ROLE / "tasks" / "preflight.yml").read_text())
    check = next(t for t in tasks if t["name"] == CHECK)
    assert [name for name in CHECKED if name in check["ansible.builtin.assert"]["that"]] == CHECKED
    for template, names in TEMPLATE_VARIABLES.items():
        assert template_variables(template) == names, template
        for name in names:
            assert name in CHECKED or specs[name].get("choices"), name
    assert specs["fabric_firewall_verdict"]["choices"] == ["reject", "drop"]
    assert sorted(p.name for p in (ROLE / "templates").iterdir()) == sorted(TEMPLATE_VARIABLES)
