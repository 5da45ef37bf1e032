# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 37, item 4: /etc/default/earlyoom (roles/memory_guard/templates/earlyoom.default.j2) is written with the
arguments gb10.serving.earlyoom_args computes from the role's variables: the prefer and avoid regexes as they are,
inside EARLYOOM_ARGS="...", the thresholds, the swap side and the report interval as the numbers it computes. The
regexes (and the thresholds, which the filter would otherwise stop on without the node or the fix) are checked by
the preflight's one-word check (roles/memory_guard/tasks/preflight.yml, the role's own task run here by the real
ansible-playbook) before anything on the node changes; each variable is tried with a line break and a quote."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jinja2
import jinja2.meta
import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from task_file_runner import run_task_file
from template_words import refusal

from ansible_collections.gb10.serving.plugins.module_utils._earlyoom import build_args

ROLE = Path(__file__).resolve().parents[4] / "roles" / "memory_guard"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
SPECS = yaml.safe_load((ROLE / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
CHECK = "Refuse a value /etc/default/earlyoom could not hold as one word"
BAD = {"a line break": '\nEARLYOOM_ARGS="-m 99"', "a quote": '"'}
# Written as they are (the regexes) or read by the check before the filter (the thresholds).
CHECKED = [
    "memory_guard_prefer_regex",
    "memory_guard_avoid_regex",
    "memory_guard_sigterm_threshold",
    "memory_guard_sigkill_threshold",
]
# Written as the filter's own numbers (int() or float() of them), typed int by the argument_specs.
NUMBERS = [
    "memory_guard_swappiness",
    "memory_guard_swap_sigterm_percent",
    "memory_guard_swap_sigkill_percent",
    "memory_guard_report_interval",
]
SETTINGS = {
    "sigterm": "memory_guard_sigterm_threshold",
    "sigkill": "memory_guard_sigkill_threshold",
    "swappiness": "memory_guard_swappiness",
    "swap_sigterm_percent": "memory_guard_swap_sigterm_percent",
    "swap_sigkill_percent": "memory_guard_swap_sigkill_percent",
    "report_interval": "memory_guard_report_interval",
    "prefer": "memory_guard_prefer_regex",
    "avoid": "memory_guard_avoid_regex",
}


def check(tmp_path, **given):
    """(rc, output) of the preflight's one-word check, the role's own task, on localhost with the role's defaults."""
    tasks = yaml.safe_load((ROLE / "tasks" / "preflight.yml").read_text())
    task = next(t for t in tasks if t["name"] == CHECK)
    tasks_file = tmp_path / "check.yml"
    tasks_file.write_text(json.dumps([task]))
    return run_task_file(tmp_path, tasks_file, {**DEFAULTS, **given}, name="The one-word check")


def rendered(**given):
    """/etc/default/earlyoom as the template writes it from the filter's arguments (Jinja, as Ansible renders it)."""
    settings = {key: given.get(name, DEFAULTS[name]) for key, name in SETTINGS.items()}
    earlyoom = build_args(mem_total_mib=122880, swap_total_mib=0, **settings)
    source = (ROLE / "templates" / "earlyoom.default.j2").read_text()
    return (
        jinja2.Environment(keep_trailing_newline=True)
        .from_string(source)
        .render(ansible_managed="managed", __memory_guard_earlyoom=earlyoom)
    )


def test_pitfall_a_quote_in_a_regex_ends_earlyoom_args_and_a_line_break_adds_a_setting(tmp_path):
    regex = DEFAULTS["memory_guard_prefer_regex"] + BAD["a line break"]
    assert re.search(r'^EARLYOOM_ARGS="-m 99"', rendered(memory_guard_prefer_regex=regex), re.M)
    rc, out = check(tmp_path, memory_guard_prefer_regex=regex)
    assert rc == 2, out[-3000:]
    msg = refusal(out)
    assert msg.startswith(f"localhost: memory_guard_prefer_regex is {json.dumps(regex)}; set a regex without"), msg
    assert "e.g. '^(VLLM::|ray::|raylet|vllm)'" in msg


@pytest.mark.parametrize("kind", sorted(BAD))
def test_each_variable_written_as_it_is_refuses_a_line_break_and_a_quote(tmp_path, kind):
    given = {name: f"{DEFAULTS[name]}{BAD[kind]}" for name in CHECKED}
    rc, out = check(tmp_path, **given)
    assert rc == 2, out[-3000:]
    msg = refusal(out)
    assert msg.startswith("localhost: "), msg
    for name in CHECKED:
        shown = given[name].strip() if name.endswith("_threshold") else given[name]
        assert f"{name} is {json.dumps(shown)}; set " in msg, msg


@pytest.mark.parametrize("kind", sorted(BAD))
@pytest.mark.parametrize("name", NUMBERS)
def test_each_number_is_written_as_the_filters_number_or_refused_by_the_argument_specs(name, kind):
    value = f"{DEFAULTS[name]}{BAD[kind]}"
    checked = ArgumentSpecValidator(SPECS).validate({**DEFAULTS, name: value})
    assert checked.errors.messages, (name, value)
    # What argument_specs take (int() strips whitespace, the value is not replaced) is written as the number: the
    # comment line's arithmetic too (it wrote swappiness as given, "0<line break>" ended the comment).
    value = f"{DEFAULTS[name]}\n"
    assert not ArgumentSpecValidator(SPECS).validate({**DEFAULTS, name: value}).errors.messages
    text = rendered(**{name: value, "memory_guard_swappiness": 1 if "swap_" in name else 0})
    assert text.count("\n") == 3 and text.endswith('"\n'), text


def test_values_at_the_edge_of_the_patterns_pass(tmp_path):
    rc, out = check(
        tmp_path,
        memory_guard_sigterm_threshold=" 4.9GiB\n",
        memory_guard_sigkill_threshold="2500 MiB",
        memory_guard_prefer_regex="^(VLLM::|ray::|a[.]b{2,3}|(?i)x$|@,;=%&!~`<>)",
        memory_guard_avoid_regex="",
    )
    assert rc == 0, out[-3000:]
    rc, out = check(tmp_path, memory_guard_sigterm_threshold=4, memory_guard_sigkill_threshold=2.5)
    assert rc == 0, out[-3000:]


def test_every_variable_the_template_writes_is_checked():
    parsed = jinja2.Environment().parse((ROLE / "templates" / "earlyoom.default.j2").read_text())
    assert jinja2.meta.find_undeclared_variables(parsed) == {"ansible_managed", "__memory_guard_earlyoom"}
    computed = yaml.safe_load((ROLE / "tasks" / "checks.yml").read_text())[0]["ansible.builtin.set_fact"]
    feeds = set(re.findall(r"\bmemory_guard_[a-z_]+", computed["__memory_guard_earlyoom"]))
    assert feeds == set(CHECKED + NUMBERS) == set(SETTINGS.values())
    for name in NUMBERS:
        assert SPECS[name]["type"] == "int", name
    tasks = yaml.safe_load((ROLE / "tasks" / "preflight.yml").read_text())
    assert tasks[0]["name"] == CHECK, "checked before anything else"
    assert [word[0] for word in tasks[0]["vars"]["__memory_guard_words"]] == CHECKED
    assert sorted(p.name for p in (ROLE / "templates").iterdir()) == ["earlyoom.default.j2"]
