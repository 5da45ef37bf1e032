# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 37, item 4: every role variable roles/serving writes into its units and env files is checked before
configure writes them. Most of what the units hold is the plan's (argv, containers, Conflicts=, markers: checked by
the plan's rules). Of the role's own and roles/gb10's: what is written bare (ExecStop='s --time, the watchdog's
comment and timer, the warm agent's ListenStream=, the Ray unit's comment) and the folders (docker's --volume
host:container and engine.env) are refused by the preflight's one-word check; what reaches ExecStart= does so
through gb10.serving.systemd_exec, which quotes every word, or through | int; the secrets through
gb10.serving.docker_env_file, which refuses a line break in a value and a name that is not one, and through the
preflight's secrets check, which names them without their values. Each is tried with a line break and a quote, the
checks by the role's own preflight tasks run by the real ansible-playbook."""

from __future__ import annotations

import json
import re

import pytest
import yaml
from ansible.errors import AnsibleFilterError
from serving_render import ROLE, STOP_SCRIPT, environment, plain_defaults, render_warm_agent, render_watchdog
from task_file_runner import run_task_file
from template_words import public_variables as role_public_variables
from template_words import refusal
from test_unit_templates import IMAGE, SECRETS_EXEC, UNITS

GB10 = ROLE.parent / "gb10"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
GB10_DEFAULTS = yaml.safe_load((GB10 / "defaults" / "main.yml").read_text())
ROLE_VARS = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
CHECK = "Refuse a value the serving units could not hold as one word"
SECRETS_CHECK = "Refuse a secret the root-only env files could not hold on one line"
BAD = {"a line break": "\nExecStartPost=/tmp/evil", "a quote": '"'}
# Written bare, or as docker's --volume words and engine.env lines, or a number the ExecStop script hands docker
# (serving_stop_cold_timeout: quoted there, but docker would refuse it only at the stop): the preflight's one-word
# check.
CHECKED = [
    "serving_stop_timeout",
    "serving_stop_cold_timeout",
    "serving_watchdog_failures",
    "serving_watchdog_interval",
    "gb10_warm_agent_port",
    "gb10_fabric_address",
    "serving_config_dir",
    "serving_hf_cache_dir",
    "serving_flashinfer_cache_dir",
    "serving_vllm_cache_dir",
    "serving_ray_dir",
]
# Reach a unit only as words of ExecStart= (systemd_exec quotes each) or through | int.
QUOTED = [
    "serving_capabilities",
    "serving_tp_capabilities",
    "serving_docker_gpus",
    "serving_stop_grace",
    "serving_warmup_max_tokens",
    "serving_warmup_prompt",
    "serving_warmup_timeout",
    "serving_watchdog_probe_timeout",
    "serving_watchdog_start_grace",
    "serving_watchdog_ray_start_grace",
    "serving_watchdog_rank_start_grace",
    "serving_watchdog_ray_timeout",
    # the watchdog's admission (issue 39 item 2): compared, or through | int (_serving_stated_available_mib)
    "serving_memory_admission",
    "gb10_node_figures_prefer",
    "gb10_stated_facts",
]
# secrets.env and ray.env (Ray's token, serving_ray_auth_token where given), through docker_env_file.
SECRETS = ["gb10_api_key", "serving_secrets", "serving_ray_auth_token"]
GOOD = {
    **{k: v for k, v in GB10_DEFAULTS.items() if not str(v).startswith("{{")},
    **plain_defaults(),
    "serving_hf_cache_dir": GB10_DEFAULTS["gb10_hf_cache_dir"],
    "serving_flashinfer_cache_dir": GB10_DEFAULTS["gb10_flashinfer_cache_dir"],
    "serving_vllm_cache_dir": GB10_DEFAULTS["gb10_vllm_cache_dir"],
    "gb10_fabric_address": "192.168.200.11",
}


def check(tmp_path, **given):
    """(rc, output) of the preflight's one-word and secrets checks, the role's own tasks, on localhost."""
    tasks = yaml.safe_load((ROLE / "tasks" / "preflight.yml").read_text())
    chosen = [t for t in tasks if t["name"] in (CHECK, SECRETS_CHECK)]
    assert len(chosen) == 2
    tasks_file = tmp_path / "check.yml"
    tasks_file.write_text(json.dumps(chosen))
    return run_task_file(tmp_path, tasks_file, {**GOOD, **given}, name="The serving checks")


def unit_values(**given):
    """An engine or Ray unit's variables as the role derives them from ``given`` (vars/main.yml's mounts)."""
    values = {**GOOD, **given}
    config = values["serving_config_dir"]
    return {
        **values,
        "ansible_managed": "managed",
        "__serving_image": IMAGE,
        "_serving_plan": {
            "profile": "p",
            "model": {"repo_id": "o/m", "served_model_name": "m"},
            "tensor_parallel_size": 2,
            "mp": {"master_address": "192.168.200.11", "master_port": 29500},
        },
        "_serving_model_name": "m",  # vars/main.yml: the plan's served_model_name
        "_serving_node_warms": [],  # no warm agent (the role's ExecStop then waits serving_stop_timeout alone)
        "_serving_stop_script": STOP_SCRIPT,
        "_serving_engine_env_file": f"{config}/engine.env",
        "_serving_secrets_env_file": f"{config}/secrets.env",
        "_serving_secrets_exec_bin": SECRETS_EXEC,
        "_serving_ray_env_file": f"{config}/ray.env",
        "_serving_mounts": [
            {"source": values["serving_hf_cache_dir"], "target": "/root/.cache/huggingface", "read_only": True},
            {"source": values["serving_flashinfer_cache_dir"], "target": "/root/.cache/flashinfer-workspace"},
            {"source": values["serving_vllm_cache_dir"], "target": "/root/.cache/vllm-cache"},
        ],
        "_serving_ray_mounts": [{"source": f"{values['serving_ray_dir']}/tmp", "target": "/tmp/ray"}],
    }


ENGINE_UNITS = {
    "gb10-vllm.service.j2": "replica",
    "gb10-ray.service.j2": "ray_head",
    "gb10-vllm-tp.service.j2": "ray_head",
    "gb10-vllm-mp.service.j2": "tp_head",
}


def render_unit(template, **given):
    role = ENGINE_UNITS[template]
    item = next(u for u in UNITS[role]["units"] if u["template"] == template)
    # the plan's /dev/shm size: validated by the plan (engine_shm_size), as the unit gets it
    node = {
        "role": role,
        "argv": ["vllm", "serve", "/m"],
        "ray_start": ["ray", "start", "--head"],
        "rank": 0,
        "shm_size": "1g" if role in ("replica", "tp_head", "tp_rank") else None,
    }
    return environment().get_template(template).render(**unit_values(**given), _serving_node=node, item=item)


def render_watchdog_with_warm_up(kind, **given):
    unit = next(u for u in UNITS["replica"]["units"] if u["warm"])
    values = {**GOOD, **given}
    return render_watchdog(kind, unit["watchdog"], _serving_node_warms=[unit], **values)


def directives(text):
    return [line.split("=", 1)[0] for line in text.splitlines() if line and not line.startswith("#")]


def public_variables(source):
    """The role's public variables ``source`` reads, directly or through vars/main.yml (template_words.py)."""
    return role_public_variables(source, ROLE_VARS, ("serving_", "gb10_"))


def test_pitfall_a_line_break_in_serving_stop_timeout_adds_a_directive(tmp_path):
    # ExecStop=/usr/bin/docker stop --time <serving_stop_timeout> <container>: written bare; argument_specs take
    # "120\n" as an int, and anything after the line break is a directive of its own.
    timeout = "120" + BAD["a line break"]
    lines = render_unit("gb10-vllm.service.j2", serving_stop_timeout=timeout).splitlines()
    assert any(line.startswith("ExecStartPost=/tmp/evil") for line in lines)
    rc, out = check(tmp_path, serving_stop_timeout=timeout)
    assert rc == 2, out[-3000:]
    msg = refusal(out)
    assert msg.startswith(f"localhost: serving_stop_timeout is {json.dumps(timeout)}; set a whole number"), msg
    assert "e.g. 120" in msg


@pytest.mark.parametrize("kind", sorted(BAD))
def test_each_checked_variable_refuses_a_line_break_and_a_quote(tmp_path, kind):
    given = {name: f"{GOOD[name]}{BAD[kind]}" for name in CHECKED}
    rc, out = check(tmp_path, **given)
    assert rc == 2, out[-3000:]
    msg = refusal(out)
    assert msg.startswith("localhost: "), msg
    for name in CHECKED:
        assert f"{name} is {json.dumps(given[name])}; set " in msg, msg


def test_a_colon_in_a_folder_would_move_a_mount_and_is_refused(tmp_path):
    rc, out = check(tmp_path, serving_hf_cache_dir="/var/lib/gb10/hf-cache:/etc", serving_stop_timeout="120\n")
    assert rc == 2, out[-3000:]
    msg = refusal(out)
    assert 'serving_hf_cache_dir is "/var/lib/gb10/hf-cache:/etc"; set an absolute path' in msg
    assert 'serving_stop_timeout is "120\\n"; set a whole number, e.g. 120' in msg


@pytest.mark.parametrize("template", sorted(ENGINE_UNITS))
@pytest.mark.parametrize("kind", sorted(BAD))
def test_what_reaches_execstart_is_quoted_one_word_each(template, kind):
    clean = render_unit(template)
    spoiled = {
        "serving_capabilities": ["SYS_NICE" + BAD[kind]],
        "serving_tp_capabilities": ["IPC_LOCK" + BAD[kind]],
        "serving_docker_gpus": "all" + BAD[kind],
        "serving_stop_grace": "30" + BAD[kind],
    }
    text = render_unit(template, **spoiled)
    assert directives(text) == directives(clean), text
    exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    assert "\n" not in exec_start and "ExecStartPost" not in directives(text)


@pytest.mark.parametrize("kind", sorted(BAD))
def test_the_watchdogs_values_reach_it_as_quoted_words(kind):
    names = [n for n in QUOTED if n.startswith(("serving_warmup", "serving_watchdog"))]
    clean = render_watchdog_with_warm_up("service")
    text = render_watchdog_with_warm_up("service", **{name: f"{GOOD[name]}{BAD[kind]}" for name in names})
    assert directives(text) == directives(clean), text
    assert "--warmup-prompt" in text


def test_docker_env_file_refuses_a_line_break_in_a_value_and_a_name_that_is_not_one():
    env = environment()
    env.filters["combine"] = lambda a, b: {**a, **b}
    secrets = env.get_template("secrets.env.j2")
    assert secrets.render(ansible_managed="m", _serving_secrets={"HF_TOKEN": 'a"b'}).endswith('HF_TOKEN=a"b')
    for bad in ({"HF_TOKEN": "abc\nEVIL=1"}, {"HF_TOKEN": "abc\r"}, {"HF TOKEN": "abc"}, {"A=B\nC": "1"}):
        with pytest.raises(AnsibleFilterError):
            secrets.render(ansible_managed="m", _serving_secrets=bad)
    engine = env.get_template("engine.env.j2")
    with pytest.raises(AnsibleFilterError, match="line break"):
        engine.render(
            ansible_managed="m",
            _serving_node={"container_env": {"VLLM_CACHE_ROOT": "/root/.cache/vllm-cache\nLD_PRELOAD=/tmp/evil.so"}},
        )
    ray = env.get_template("ray.env.j2")
    with pytest.raises(AnsibleFilterError, match="line break"):
        ray.render(ansible_managed="m", _serving_ray_auth=True, __serving_ray_token="t\nEVIL=1")


@pytest.mark.parametrize("kind", sorted(BAD))
def test_secrets_with_a_line_break_are_refused_by_name_never_shown(tmp_path, kind):
    canary = "canary-7f3a"
    given = {
        "serving_secrets": {"HF_TOKEN": canary + BAD[kind], f"BAD{BAD[kind]}": "x"},
        "gb10_api_key": canary + BAD[kind],
        "serving_ray_auth_token": canary + BAD[kind],
    }
    rc, out = check(tmp_path, **given)
    if kind == "a quote":
        # docker's --env-file takes a quote as part of the value: only the name is refused
        assert rc == 2, out[-3000:]
        msg = refusal(out)
        assert msg.startswith('localhost: serving_secrets key "BAD\\"" is no environment variable name; set'), msg
        assert "holds a line break" not in msg and canary not in out
        return
    assert rc == 2, out[-3000:]
    msg = refusal(out)
    assert msg.startswith("localhost: "), msg
    assert 'serving_secrets["HF_TOKEN"] holds a line break' in msg
    assert "gb10_api_key holds a line break" in msg and "serving_ray_auth_token holds a line break" in msg
    assert canary not in out


def test_values_at_the_edge_of_the_patterns_pass(tmp_path):
    rc, out = check(
        tmp_path,
        serving_stop_timeout=0,
        gb10_warm_agent_port="0",
        gb10_fabric_address="fd00:77::b",
        serving_hf_cache_dir="/srv/gb10_2/hf-cache.v2+a@b=c,d",
        serving_secrets={"HF_TOKEN": 'hf_"x" y=z#', "_A1": ""},
        gb10_api_key="k'e\"y $x",
    )
    assert rc == 0, out[-3000:]


def test_every_variable_a_template_writes_is_checked():
    tasks = yaml.safe_load((ROLE / "tasks" / "preflight.yml").read_text())
    task = next(t for t in tasks if t["name"] == CHECK)
    assert [word[0] for word in task["vars"]["__serving_words"]] == CHECKED
    written = {}
    for path in sorted((ROLE / "templates").iterdir()):
        written[path.name] = public_variables(path.read_text())
        for name in written[path.name]:
            assert name in CHECKED + QUOTED + SECRETS, (path.name, name)
    # ray.env's token is set by configure.yml from serving_ray_auth_token (or the head's, or a new one)
    assert "__serving_ray_token" in (ROLE / "templates" / "ray.env.j2").read_text()
    assert set().union(*written.values()) == set(CHECKED + QUOTED + SECRETS) - {"serving_ray_auth_token"}
    # what QUOTED reaches is an ExecStart= word or an int, never a bare line of the unit
    for path in sorted((ROLE / "templates").iterdir()):
        for line in path.read_text().splitlines():
            bare = set(re.findall(r"\{\{\s*([a-z0-9_]+)\s*\}\}", line))
            assert not bare & set(QUOTED + SECRETS), (path.name, line)
    # the warm agent's socket: ListenStream=<gb10_fabric_address>:<gb10_warm_agent_port>, both checked
    unit = next(u for u in UNITS["replica"]["units"] if u["warm"])
    assert "ListenStream=192.168.200.11:8009" in render_warm_agent("socket", unit).splitlines()


def test_pitfall_memory_admitted_by_free_not_available_retired_shm_variable_refused(tmp_path):
    """Issue 39 item 2: the engine's /dev/shm is the plan's (memory.shm_size, counted in the node's memory table); a
    site still setting the retired role variable is told where the size went, not silently ignored."""
    tasks = yaml.safe_load((ROLE / "tasks" / "preflight.yml").read_text())
    [retired] = [t for t in tasks if t["name"] == "Refuse the retired serving_replica_shm_size"]
    tasks_file = tmp_path / "retired.yml"
    tasks_file.write_text(json.dumps([retired]))
    rc, out = run_task_file(tmp_path, tasks_file, {"serving_replica_shm_size": "8g"}, name="The retired variable")
    assert rc == 2, out[-3000:]
    assert "set memory.shm_size in the serving profile instead (default 1g)" in refusal(out)
    rc, out = run_task_file(tmp_path, tasks_file, {}, name="The retired variable")
    assert rc == 0, out[-3000:]
