"""A role's task file run by the real ansible-playbook on localhost, with the variables a test gives it.

Unit tests of a role's loop or preflight run the tasks file itself, so that what they prove is the role's YAML and
not a copy of its logic.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def run_task_file(tmp_path, tasks_file, variables, *, name, hostvars=None, args=(), env=None, timeout=300):
    """(returncode, stdout + stderr) of one play on localhost that includes ``tasks_file`` as the task ``name``.

    ``hostvars``: localhost's inventory variables (written to an inventory file), else the bare ``localhost,``
    inventory; ``args``: more of ansible-playbook's options; ``env``: more of its environment.
    """
    play = [
        {
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars": variables,
            "tasks": [{"name": name, "ansible.builtin.include_tasks": {"file": str(tasks_file)}}],
        }
    ]
    inventory = "localhost,"
    if hostvars is not None:
        inventory = str(tmp_path / "hosts.yml")
        Path(inventory).write_text(yaml.safe_dump({"all": {"hosts": {"localhost": hostvars}}}))
    return run_play(tmp_path, play, inventory, args=args, env=env, timeout=timeout)


def run_play(tmp_path, play, inventory, *, args=(), env=None, timeout=300):
    """(returncode, stdout + stderr) of ansible-playbook on ``play`` (a list of plays, written to play.json) with
    ``inventory`` (a path, or ansible-playbook's ``host,`` form), run in ``tmp_path`` with the checkout's collections
    and its own ANSIBLE_HOME and temporary folder; ``env``: more of its environment."""
    (tmp_path / "play.json").write_text(json.dumps(play))
    done = subprocess.run(
        playbook_argv(tmp_path / "play.json", inventory, args),
        cwd=tmp_path,
        env=playbook_environment(tmp_path, env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


def playbook_argv(playbook, inventory, args=()):
    return [str(Path(sys.executable).parent / "ansible-playbook"), *args, "-i", inventory, str(playbook)]


def playbook_environment(tmp_path, env=None):
    """ansible-playbook's environment for a run in ``tmp_path`` (see run_play); ``env``: more of it."""
    return {
        **os.environ,
        "ANSIBLE_COLLECTIONS_PATH": str(REPO / "collections"),
        "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "ANSIBLE_STDOUT_CALLBACK": "default",
        # make exports ANSIBLE_CONFIG (the checkout's ansible.cfg, callback_result_format = yaml): the tests read
        # results in one shape whether pytest runs under make or alone.
        "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_DEPRECATION_WARNINGS": "0",
        **(env or {}),
    }


def run_role_tasks(tmp_path, role, tasks_from, variables, **kwargs):
    """(returncode, stdout + stderr) of ``tasks_from`` of the collection's ``role`` run as the role runs it
    (include_role: its defaults, its vars/main.yml, its files/ for lookups), with ``variables`` as play vars (above
    the role's defaults, below its vars/main.yml, as an inventory's group_vars would be); else as run_task_file."""
    tasks = tmp_path / f"{role}-{tasks_from}.yml"
    tasks.write_text(
        json.dumps(
            [
                {
                    "name": f"{role} {tasks_from}",
                    "ansible.builtin.include_role": {"name": f"gb10.serving.{role}", "tasks_from": tasks_from},
                }
            ]
        )
    )
    return run_task_file(tmp_path, tasks, variables, **kwargs)
