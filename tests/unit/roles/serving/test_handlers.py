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
