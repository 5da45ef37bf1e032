# Copyright: gb10.serving maintainers
# Apache-2.0
"""The node_templates action renders as ansible.builtin.template does: the real ansible-playbook writes one template
of a role both ways (ansible_managed, trim_blocks, a per-file item, a literal %s) and the bytes are the same; a second
run changes nothing; a template that fails to render names itself and its destination."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from task_file_runner import run_play

TEMPLATE = """# {{ ansible_managed }}
{% for x in [1, 2] %}
line {{ x }} of {{ item.name }}
{% endfor %}
  {% if true %}
indented
  {% endif %}
end\\t{{ '%s' }} {{ shared }}
"""


def _role(tmp_path, tasks):
    role = tmp_path / "roles" / "r"
    (role / "templates").mkdir(parents=True)
    (role / "tasks").mkdir()
    (role / "files").mkdir()
    (role / "templates" / "a.j2").write_text(TEMPLATE)
    (role / "files" / "program").write_bytes(b"#!/bin/sh\n{{ not templated }}\n\n")
    (role / "tasks" / "main.yml").write_text(json.dumps(tasks))
    play = [
        {"hosts": "localhost", "connection": "local", "gather_facts": False, "vars": {"shared": "S"}, "roles": ["r"]}
    ]
    return play, {"ANSIBLE_ROLES_PATH": str(tmp_path / "roles")}


def test_renders_the_same_bytes_as_ansible_builtin_template_and_then_changes_nothing(tmp_path):
    tasks = [
        {
            "ansible.builtin.template": {"src": "a.j2", "dest": str(tmp_path / "by-template"), "mode": "0644"},
            "vars": {"item": {"name": "n1"}},
        },
        {
            "gb10.serving.node_templates": {
                "files": [
                    {
                        "src": "a.j2",
                        "dest": str(tmp_path / "by-node-templates"),
                        "mode": "0644",
                        "vars": {"item": {"name": "n1"}},
                    },
                ]
            }
        },
    ]
    play, env = _role(tmp_path, tasks)
    rc, out = run_play(tmp_path, play, "localhost,", env=env)
    assert rc == 0, out
    written = (tmp_path / "by-node-templates").read_bytes()
    assert written == (tmp_path / "by-template").read_bytes()
    assert written.startswith(b"# Ansible managed\nline 1 of n1\nline 2 of n1\n  indented\n"), written
    rc, out = run_play(tmp_path, play, "localhost,", env=env)
    assert rc == 0 and "changed=0" in out, out


def test_a_file_of_the_role_lands_byte_for_byte_as_ansible_builtin_copy_writes_it_and_content_as_given(tmp_path):
    tasks = [
        {"ansible.builtin.copy": {"src": "program", "dest": str(tmp_path / "by-copy"), "mode": "0755"}},
        {
            "gb10.serving.node_templates": {
                "directories": [{"path": str(tmp_path / "made" / "deep"), "mode": "0700"}],
                "files": [
                    {"file": "program", "dest": str(tmp_path / "made" / "deep" / "program"), "mode": "0755"},
                    {"content": "", "dest": str(tmp_path / "made" / "empty"), "mode": "0600"},
                ],
            }
        },
    ]
    play, env = _role(tmp_path, tasks)
    rc, out = run_play(tmp_path, play, "localhost,", env=env)
    assert rc == 0, out
    assert (tmp_path / "made" / "deep" / "program").read_bytes() == (tmp_path / "by-copy").read_bytes()
    assert (tmp_path / "made" / "empty").read_bytes() == b""
    rc, out = run_play(tmp_path, play, "localhost,", env=env)
    assert rc == 0 and "changed=0" in out, out


def test_a_template_that_does_not_render_is_named_with_its_destination(tmp_path):
    tasks = [
        {"gb10.serving.node_templates": {"files": [{"src": "a.j2", "dest": str(tmp_path / "out"), "mode": "0644"}]}}
    ]
    play, env = _role(tmp_path, tasks)
    rc, out = run_play(tmp_path, play, "localhost,", env=env)
    assert rc != 0 and f"node_templates: a.j2 for {tmp_path / 'out'}" in out, out
    assert not (tmp_path / "out").exists()
