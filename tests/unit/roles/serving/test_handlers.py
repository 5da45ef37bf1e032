# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/serving's one restart handler: the node's units from the plan, in start order, only those that changed
(every unit when an env file they all read changed, else each unit whose own file changed), templated by Ansible."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

REPO = Path(__file__).resolve().parents[4]
ROLE = REPO / "roles" / "serving"
sys.path.insert(0, str(REPO / "tests" / "unit" / "plugins" / "module_utils" / "_plan"))
from _plan_fixtures import shipped_plan

from ansible_collections.gb10.serving.plugins.module_utils._units import unit_template_files

HANDLERS = yaml.safe_load((ROLE / "handlers" / "main.yml").read_text())
CONFIGURE = yaml.safe_load((ROLE / "tasks" / "configure.yml").read_text())
RESTART = next(h for h in HANDLERS if h["name"] == "Restart the serving units")
# What each env file's change looks like to the handler: engine.env is written with the units (its path among
# __serving_unit_files.written), secrets.env and ray.env together, root only (__serving_secret_files changed).
ENV_FILES = ("engine", "secrets", "ray")
REGISTERS = ("__serving_unit_files", "__serving_secret_files")


def _restarted(plan, host, changed_env=(), changed_units=(), registered=REGISTERS):
    role_vars = {
        **yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()),
        **yaml.safe_load((ROLE / "vars" / "main.yml").read_text()),
        **RESTART["vars"],
    }
    variables = {k: trust_as_template(v) if isinstance(v, str) else v for k, v in role_vars.items()}
    variables.update(gb10_plan=plan, inventory_hostname=host)
    templar = Templar(loader=DataLoader(), variables=variables)
    engine_env = templar.template(trust_as_template(variables["_serving_engine_env_file"]))
    written = [f"/etc/systemd/system/{unit}" for unit in changed_units] + (
        ["engine"] if "engine" in changed_env else []
    )
    if "__serving_unit_files" in registered:
        variables["__serving_unit_files"] = {"written": [engine_env if p == "engine" else p for p in written]}
    if "__serving_secret_files" in registered:
        variables["__serving_secret_files"] = {"changed": bool({"secrets", "ray"} & set(changed_env))}
    templar = Templar(loader=DataLoader(), variables=variables)
    return [item["unit"] for item in templar.template(trust_as_template(RESTART["loop"]))]


def test_every_file_the_units_are_restarted_for_notifies_the_one_handler_and_registers_what_it_reads():
    notifying = {task["name"]: task for task in CONFIGURE if "Restart the serving units" in task.get("notify", [])}
    registers = {task["register"] for task in notifying.values()}
    assert registers == set(REGISTERS)
    assert [h["name"] for h in HANDLERS if "Restart" in h["name"]] == [
        "Restart the serving units",
        "Restart serving warm agent sockets",
        "Restart serving watchdog timers",
    ]


def test_a_changed_env_file_restarts_every_unit_of_the_node_in_start_order_a_unit_file_only_its_unit():
    plan = shipped_plan("sim", "sim-tp-ray")
    head = [unit["unit"] for unit in plan["nodes"]["spark-1"]["units"]]
    assert head == ["gb10-ray-head.service", "gb10-vllm-tp.service"]
    assert _restarted(plan, "spark-1") == []
    assert _restarted(plan, "spark-1", changed_units={"gb10-vllm-tp.service"}) == ["gb10-vllm-tp.service"]
    for env_file in ENV_FILES:
        assert _restarted(plan, "spark-1", changed_env={env_file}) == head, env_file
    assert _restarted(plan, "spark-2", changed_env={"ray"}) == ["gb10-ray-worker.service"]
    # a task that did not run (another tag) registered nothing: nothing is restarted for it
    replicas = shipped_plan("sim", "sim-replicas")
    assert _restarted(replicas, "spark-1", registered=()) == []
    assert _restarted(replicas, "spark-1", changed_env={"secrets"}, registered=("__serving_unit_files",)) == []
    assert _restarted(
        replicas, "spark-1", changed_units={"gb10-vllm.service"}, registered=("__serving_unit_files",)
    ) == ["gb10-vllm.service"]


def test_mp_launch_restarts_each_ranks_one_engine_unit_for_its_env_or_its_unit_file():
    # vLLM's own multi-node launch (sim-tp): one unit per rank, the head's and the headless rank's
    plan = shipped_plan("sim", "sim-tp")
    assert [unit["unit"] for unit in plan["nodes"]["spark-1"]["units"]] == ["gb10-vllm-mp.service"]
    assert [unit["unit"] for unit in plan["nodes"]["spark-2"]["units"]] == ["gb10-vllm-mp-rank.service"]
    assert _restarted(plan, "spark-1") == [] and _restarted(plan, "spark-2") == []
    assert _restarted(plan, "spark-1", changed_env={"secrets"}) == ["gb10-vllm-mp.service"]
    assert _restarted(plan, "spark-2", changed_env={"engine"}) == ["gb10-vllm-mp-rank.service"]
    assert _restarted(plan, "spark-2", changed_units={"gb10-vllm-mp-rank.service"}) == ["gb10-vllm-mp-rank.service"]


def _role_templar(plan, host, **given):
    role_vars = {
        **yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()),
        **yaml.safe_load((ROLE / "vars" / "main.yml").read_text()),
        **yaml.safe_load((REPO / "roles" / "gb10" / "defaults" / "main.yml").read_text()),
    }
    variables = {k: trust_as_template(v) if isinstance(v, str) else v for k, v in role_vars.items()}
    variables.update(gb10_plan=plan, inventory_hostname=host, **given)
    return Templar(loader=DataLoader(), variables=variables)


def test_the_watchdog_timers_and_warm_agents_restart_for_their_own_files_only():
    # one node_templates run writes the env file, the units, the watchdogs and the warm agents (configure.yml), one
    # the programs (install.yml): each handler reads which of its files either wrote
    handlers = {h["name"]: h for h in HANDLERS}
    timers, warm = handlers["Restart serving watchdog timers"], handlers["Stop serving warm agents for their restart"]
    assert handlers["Restart serving warm agent sockets"]["when"] == warm["when"]
    plan = shipped_plan("sim", "sim-replicas")

    # the role's own lists of each handler's files, their unit files from the collection's filter as a run gets them
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    assert "serving_unit_templates('watchdogs')" in role_vars["_serving_watchdog_files"]
    assert "serving_unit_templates('warm')" in role_vars["_serving_warm_files"]
    units = plan["nodes"]["spark-1"]["units"]
    files = {
        "_serving_watchdog_files": [
            "/usr/local/libexec/gb10-serving-watchdog",
            "/usr/local/libexec/gb10-serving-lib/_admission.py",
        ]
        + [f["dest"] for f in unit_template_files(units, "watchdogs")],
        "_serving_warm_files": ["/usr/local/libexec/gb10-warm-agent"]
        + [f["dest"] for f in unit_template_files([u for u in units if u["warm"]], "warm")],
    }
    for name, paths in files.items():
        head = _role_templar(plan, "spark-1").template(trust_as_template(role_vars[name].split("+")[0] + "}}"))
        assert head == paths[: len(head)], name

    def runs(handler, programs=(), units=()):
        templar = _role_templar(
            plan,
            "spark-1",
            __serving_programs={"written": list(programs)},
            __serving_unit_files={"written": list(units)},
            **files,
        )
        return templar.evaluate_conditional(trust_as_template(handler["when"]))

    system = "/etc/systemd/system/"
    assert not runs(timers) and not runs(warm)
    assert not runs(timers, units=[system + "gb10-vllm.service"]) and not runs(
        warm, units=[system + "gb10-vllm.service"]
    )
    assert runs(timers, units=[system + "gb10-watchdog-replica.timer"])
    assert runs(timers, programs=["/usr/local/libexec/gb10-serving-lib/_admission.py"])
    assert not runs(warm, programs=["/usr/local/libexec/gb10-serving-watchdog"])
    assert runs(warm, units=[system + "gb10-warm-agent-replica.socket"])
    assert runs(warm, programs=["/usr/local/libexec/gb10-warm-agent"])
    assert not runs(timers, programs=["/usr/local/libexec/gb10-secrets-exec"])
    assert not runs(warm, programs=["/usr/local/libexec/gb10-secrets-exec"])


def test_the_warm_up_is_for_an_engine_this_run_started_one_found_running_is_its_watchdogs():
    plan = shipped_plan("sim", "sim-replicas")

    def warmed_before(active, before, at_ready, the_plan=plan):
        units = {"gb10-vllm.service": {"active": active, "invocation": before}}
        templar = _role_templar(
            the_plan,
            "spark-1",
            ansible_facts={"gb10_units": units},
            __serving_health={"unit_state": {"InvocationID": at_ready}},
        )
        return templar.template(trust_as_template("{{ _serving_engine_warmed_before }}"))

    # found running, the same run at ready: warmed when it started (the watchdog warms it when its marker is missing)
    assert warmed_before("active", "run-a", "run-a") is True
    # restarted by this run's handler, started by it, or the read not made: warmed here
    assert warmed_before("active", "run-a", "run-b") is False
    assert warmed_before("inactive", "", "run-b") is False
    assert warmed_before("failed", "run-a", "run-a") is False
    templar = _role_templar(plan, "spark-1", __serving_health={"unit_state": {"InvocationID": "run-a"}})
    assert templar.template(trust_as_template("{{ _serving_engine_warmed_before }}")) is False
    # no warm agent (the engine's watchdog has no marker to warm by): every run warms it, as before
    without_agents = _role_templar(
        plan,
        "spark-1",
        gb10_warm_agent_port=0,
        ansible_facts={"gb10_units": {"gb10-vllm.service": {"active": "active", "invocation": "run-a"}}},
        __serving_health={"unit_state": {"InvocationID": "run-a"}},
    )
    assert without_agents.template(trust_as_template("{{ _serving_engine_warmed_before }}")) is False
    service = yaml.safe_load((ROLE / "tasks" / "service.yml").read_text())
    warmup = next(t for t in service if t.get("ansible.builtin.import_tasks", {}).get("file") == "warmup.yml")
    assert "not _serving_engine_warmed_before" in warmup["when"]
