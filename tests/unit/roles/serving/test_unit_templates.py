# Copyright: gb10.serving maintainers
# Apache-2.0
"""The serving unit templates render the hardened docker run (issue 18 item 6): every capability dropped and only
the justified ones back, no-new-privileges, the HF cache read-only, host IPC only in tensor-parallel, Ray's token
from its own root-only env file and the serving secrets kept out of the Ray units and of the headless ranks of
vLLM's own multi-node launch."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import yaml
from serving_render import (
    AGENT_BIN,
    ROLE,
    STOP_SCRIPT,
    WATCHDOG_VARS,
    environment,
    plain_defaults,
    render_warm_agent,
    render_watchdog,
)

IMAGE = "registry:5000/vllm@sha256:" + "0" * 64
PLAN_MOUNTS_HF = "/var/lib/gb10/hf-cache:/root/.cache/huggingface:ro"
SECRETS_EXEC = "/usr/local/libexec/gb10-secrets-exec"
# Issue 37 item 2: the serving secrets and their loader, mounted read-only; the loader runs the plan's argv.
SECRETS_MOUNTS = [
    "/etc/gb10/serving/secrets.env:/run/gb10/secrets.env:ro",
    f"{SECRETS_EXEC}:/run/gb10/secrets-exec:ro",
]
LOADER = ["python3", "-I", "/run/gb10/secrets-exec", "/run/gb10/secrets.env", "--"]
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "_plan"))
from _plan_fixtures import plan_mod, replicas, run, shipped_plan, tp

UNITS = {role: plan_mod.units.node_units(role) for role in ("replica", "ray_head", "ray_worker", "tp_head", "tp_rank")}


def _render_text(
    template, role, argv=None, ray_start=None, item=None, plan=None, rank=None, shm_size=None, warm_agent=False
):
    """``warm_agent``: the site runs warm agents (vars/main.yml's _serving_node_warms holds the engine unit)."""
    config = "/etc/gb10/serving"
    item = item or next(u for u in UNITS[role]["units"] if u["template"] == template)
    # the plan's /dev/shm of the engine's container (memory.shm_size; its default where a test gives none)
    if shm_size is None and role in plan_mod.context.PRIVATE_SHM_ROLES:
        shm_size = plan_mod.context.DEFAULT_SHM_SIZE
    values = {
        **plain_defaults(),
        "ansible_managed": "managed",
        "gb10_fabric_address": "192.168.200.11",
        "serving_docker_gpus": "all",
        "_serving_node": {
            "role": role,
            "argv": argv or [],
            "ray_start": ray_start or [],
            "rank": rank,
            "shm_size": shm_size,
        },
        "_serving_plan": plan or {"profile": "p", "model": {"repo_id": "o/m", "served_model_name": "m"}},
        # roles/serving/vars/main.yml: the plan's served_model_name
        "_serving_model_name": (plan or {"model": {"served_model_name": "m"}})["model"]["served_model_name"],
        "item": item,
        "_serving_node_warms": [item] if warm_agent and item["warm"] else [],
        "_serving_stop_script": STOP_SCRIPT,
        "_serving_watchdog_bin": "/usr/local/libexec/gb10-serving-watchdog",
        "_serving_health_url": "http://192.168.200.11:8000/health",
        "__serving_image": IMAGE,
        "_serving_engine_env_file": f"{config}/engine.env",
        "_serving_secrets_env_file": f"{config}/secrets.env",
        "_serving_secrets_exec_bin": SECRETS_EXEC,
        "_serving_ray_env_file": f"{config}/ray.env",
        "_serving_mounts": [
            {"source": "/var/lib/gb10/hf-cache", "target": "/root/.cache/huggingface", "read_only": True},
            {"source": "/var/lib/gb10/flashinfer-cache", "target": "/root/.cache/flashinfer-workspace"},
        ],
        "_serving_ray_mounts": [{"source": "/var/lib/gb10/ray/tmp", "target": "/tmp/ray"}],
    }
    return environment().get_template(template).render(**values)


def _render_plan_unit(plan, node, unit, **extra):
    """One of the plan's units for a node, rendered as the serving role's loop renders it."""
    return _render_text(
        unit["template"],
        node["role"],
        node["argv"],
        node["ray_start"],
        item=unit,
        plan=plan,
        rank=node["rank"],
        **extra,
    )


def _exec_start(text):
    exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    return shlex.split(exec_start[len("ExecStart=") :])


def _exec_stop(text):
    """The ExecStop= words as systemd reads them: shell-like quoting, $$ for $ and %% for % (_units.systemd_word)."""
    line = next(line for line in text.splitlines() if line.startswith("ExecStop="))
    return shlex.split(line[len("ExecStop=") :].replace("$$", "$").replace("%%", "%"))


def test_a_cold_engine_stops_without_waiting_out_the_graceful_stop(tmp_path):
    # vLLM 0.32 ignores a SIGTERM that lands about 12 s into its start (roles/serving README, measured): an engine
    # without its warm marker, which its warm agent has kept from every client since its start, is stopped with
    # serving_stop_cold_timeout; a warm one keeps serving_stop_timeout for its in-flight requests.
    defaults = plain_defaults()
    docker = tmp_path / "docker"
    docker.write_text('#!/bin/sh\necho "$@"\n')
    docker.chmod(0o755)
    marker = tmp_path / "warm"
    plan = {
        "profile": "p",
        "model": {"repo_id": "o/m", "served_model_name": "m"},
        "tensor_parallel_size": 2,
        "mp": {"master_address": "192.168.200.11", "master_port": 29500},
    }
    for template, role in (
        ("gb10-vllm.service.j2", "replica"),
        ("gb10-vllm-tp.service.j2", "ray_head"),
        ("gb10-vllm-mp.service.j2", "tp_head"),
    ):
        item = next(u for u in UNITS[role]["units"] if u["template"] == template)
        argv = _exec_stop(_render_text(template, role, ["vllm", "serve", "/m"], plan=plan, rank=0, warm_agent=True))
        assert argv[:3] == ["/bin/sh", "-c", STOP_SCRIPT], argv
        assert argv[3:] == [
            "gb10-stop",
            item["warm"]["marker"],
            str(defaults["serving_stop_timeout"]),
            str(defaults["serving_stop_cold_timeout"]),
            "/usr/bin/docker",
            item["container"],
        ], argv
        # The same words with a docker that echoes its arguments and a marker of our own.
        argv[4], argv[7] = str(marker), str(docker)
        marker.unlink(missing_ok=True)
        cold = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()
        assert cold == ["stop", "--time", str(defaults["serving_stop_cold_timeout"]), item["container"]], template
        marker.write_text("warm\n")
        warm = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()
        assert warm == ["stop", "--time", str(defaults["serving_stop_timeout"]), item["container"]], template
        # Without warm agents nothing writes the marker: the graceful stop alone.
        plain = f"ExecStop=/usr/bin/docker stop --time {defaults['serving_stop_timeout']} {item['container']}"
        assert plain in _render_text(template, role, ["vllm", "serve", "/m"], plan=plan, rank=0).splitlines(), template


def _render(template, role, argv=None, ray_start=None):
    return _exec_start(_render_text(template, role, argv, ray_start))


def _opts(argv):
    return argv[: argv.index("--entrypoint")]


def _mounts(opts):
    return [opts[i + 1] for i, w in enumerate(opts) if w == "--volume"]


def test_role_vars_mount_the_hf_cache_read_only_and_ray_tmp_under_a_root_only_parent():
    variables = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    hf = next(m for m in variables["_serving_mounts"] if m["target"] == "{{ _serving_container_paths.hf_cache }}")
    assert hf["read_only"] is True
    assert variables["_serving_ray_tmp_dir"] == "{{ serving_ray_dir }}/tmp"
    install = yaml.safe_load((ROLE / "tasks" / "install.yml").read_text())
    dirs = {d["path"]: d["mode"] for d in install[0]["gb10.serving.node_templates"]["directories"]}
    assert dirs["{{ serving_ray_dir }}"] == "0700" and dirs["{{ _serving_ray_tmp_dir }}"] == "0777"


def test_the_engines_caches_outlive_the_container_and_their_host_folders_are_made():
    # A unit starts a new container each time (docker rm --force first): a cache inside it is lost at every restart.
    variables = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    mounts = {m["target"]: m for m in variables["_serving_mounts"]}
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    # mounted where the plan's container_paths say (issue 41 item 2), the paths its container_env points at
    assert variables["_serving_container_paths"] == "{{ _serving_plan.container_paths | default({}) }}"
    for source, target in (
        ("{{ serving_flashinfer_cache_dir }}", "{{ _serving_container_paths.flashinfer_workspace_base }}"),
        ("{{ serving_vllm_cache_dir }}", "{{ _serving_container_paths.vllm_cache_root }}"),
    ):
        assert mounts[target] == {"source": source, "target": target, "read_only": False}
    assert defaults["serving_vllm_cache_dir"] == "{{ gb10_vllm_cache_dir }}"
    install = yaml.safe_load((ROLE / "tasks" / "install.yml").read_text())
    made = {d["path"] for d in install[0]["gb10.serving.node_templates"]["directories"]}
    assert {"{{ serving_flashinfer_cache_dir }}", "{{ serving_vllm_cache_dir }}"} <= made
    env = (ROLE / "templates" / "engine.env.j2").read_text()
    assert "_serving_node.container_env | gb10.serving.docker_env_file" in env


def test_replica_unit_drops_every_capability_and_keeps_a_private_ipc():
    opts = _opts(_render("gb10-vllm.service.j2", "replica", argv=["vllm", "serve", "/m"]))
    assert opts[opts.index("--cap-drop") + 1] == "ALL" and "--cap-add" not in opts
    assert opts[opts.index("--security-opt") + 1] == "no-new-privileges"
    # the plan's size (memory.shm_size; 1g by default), issue 39 item 2
    assert "--ipc" not in opts and opts[opts.index("--shm-size") + 1] == "1g"
    assert PLAN_MOUNTS_HF in opts
    assert "/etc/gb10/serving/ray.env" not in opts


def test_pitfall_secret_in_docker_inspect_every_engine_unit_mounts_the_secrets_and_runs_the_plans_argv():
    """Issue 37 item 2: `docker inspect` shows -e/--env-file values (Config.Env) to the node's docker group, so no
    unit passes secrets.env as an env file: it is mounted read-only and the loader execs the plan's argv."""
    plan_argv = ["vllm", "serve", "/m", "--port", "8000"]
    for template, role in (("gb10-vllm.service.j2", "replica"), ("gb10-vllm-tp.service.j2", "ray_head")):
        argv = _render(template, role, argv=plan_argv)
        opts = _opts(argv)
        assert SECRETS_ENV not in _env_files(opts) and _env_files(opts)[0] == "/etc/gb10/serving/engine.env"
        assert _mounts(opts)[-2:] == SECRETS_MOUNTS, template
        assert _command(argv) == [*LOADER, *plan_argv], template
    # the loader the units mount is the one the role installs, from its files/
    variables = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    assert variables["_serving_secrets_exec_bin"] == SECRETS_EXEC and (ROLE / "files" / "gb10-secrets-exec").is_file()
    install = yaml.safe_load((ROLE / "tasks" / "install.yml").read_text())
    copy = next(
        f
        for t in install
        for f in t.get("gb10.serving.node_templates", {}).get("files", [])
        if f.get("file") == "gb10-secrets-exec"
    )
    assert copy["dest"] == "{{ _serving_secrets_exec_bin }}" and copy["mode"] == "0755"
    identity = (ROLE / "tasks" / "flashinfer_identity.yml").read_text()
    assert "secrets_file=_serving_identity_env_files[1].path" in identity


def test_ray_units_host_ipc_ipc_lock_only_and_the_token_file_without_the_serving_secrets():
    for role in ("ray_head", "ray_worker"):
        opts = _opts(_render("gb10-ray.service.j2", role, ray_start=["ray", "start", "--block"]))
        assert opts[opts.index("--ipc") + 1] == "host", role
        assert [opts[i + 1] for i, w in enumerate(opts) if w == "--cap-add"] == ["IPC_LOCK"], role
        assert opts[opts.index("--cap-drop") + 1] == "ALL" and "no-new-privileges" in opts, role
        env_files = [opts[i + 1] for i, w in enumerate(opts) if w == "--env-file"]
        assert env_files == ["/etc/gb10/serving/engine.env", "/etc/gb10/serving/ray.env"], role
        assert PLAN_MOUNTS_HF in opts, role
        assert ("/var/lib/gb10/ray/tmp:/tmp/ray" in opts) == (role == "ray_head"), role


def test_tp_engine_unit_joins_the_head_with_host_ipc_and_the_token():
    opts = _opts(_render("gb10-vllm-tp.service.j2", "ray_head", argv=["vllm", "serve", "/m"]))
    assert opts[opts.index("--ipc") + 1] == "host" and opts[opts.index("--pid") + 1] == "container:gb10-ray-head"
    assert [opts[i + 1] for i, w in enumerate(opts) if w == "--cap-add"] == ["IPC_LOCK"]
    env_files = [opts[i + 1] for i, w in enumerate(opts) if w == "--env-file"]
    # the serving secrets through their loader (issue 37 item 2), Ray's token as the Ray units get it
    assert env_files == ["/etc/gb10/serving/engine.env", "/etc/gb10/serving/ray.env"]
    assert _mounts(opts)[-2:] == SECRETS_MOUNTS
    assert PLAN_MOUNTS_HF in opts and "--shm-size" not in opts


def test_engine_env_moves_the_remote_code_modules_out_of_the_read_only_cache():
    # the plan's container_env of a node (plugins/module_utils/_plan/context.py), rendered as is
    node = {"container_env": plan_mod.context.container_env({"MAX_JOBS": "2", "RAY_AUTH_MODE": "token"})}
    text = environment().get_template("engine.env.j2").render(ansible_managed="managed", _serving_node=node)
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert lines == [
        "FLASHINFER_WORKSPACE_BASE=/root/.cache/flashinfer-workspace",
        "HF_MODULES_CACHE=/root/.cache/hf-modules",
        "MAX_JOBS=2",
        "RAY_AUTH_MODE=token",
        "VLLM_CACHE_ROOT=/root/.cache/vllm-cache",
    ]
    paths = plan_mod.context.CONTAINER_PATHS
    assert not paths["hf_modules_cache"].startswith(paths["hf_cache"] + "/")


def test_role_vars_read_the_ray_fence_and_the_head_from_the_plan():
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    role_vars = {
        **yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()),
        **yaml.safe_load((ROLE / "vars" / "main.yml").read_text()),
    }
    seen = {}
    for name, plan, host in (
        ("tp", run(tp()), "spark-b"),
        ("tp-noauth", run(tp(ray={"auth": "disabled"})), "spark-a"),
        ("replicas", run(replicas()), "spark-a"),
    ):
        variables = {k: trust_as_template(v) if isinstance(v, str) else v for k, v in role_vars.items()}
        variables.update(
            gb10_plan=plan, inventory_hostname=host, gb10_hf_cache_dir="/h", gb10_flashinfer_cache_dir="/f"
        )
        templar = Templar(loader=DataLoader(), variables=variables)
        seen[name] = [
            templar.template(trust_as_template("{{ " + k + " }}"))
            for k in ("_serving_ray", "_serving_ray_auth", "_serving_ray_head")
        ]
    assert seen == {
        "tp": [True, True, "spark-a"],
        "tp-noauth": [True, False, "spark-a"],
        "replicas": [False, False, "spark-a"],
    }


SIM_UNITS = {
    "sim-replicas": {
        "spark-1": [
            "gb10-vllm.service",
            "gb10-watchdog-replica.service",
            "gb10-watchdog-replica.timer",
            "gb10-warm-agent-replica.socket",
            "gb10-warm-agent-replica.service",
        ],
        "spark-2": [
            "gb10-vllm.service",
            "gb10-watchdog-replica.service",
            "gb10-watchdog-replica.timer",
            "gb10-warm-agent-replica.socket",
            "gb10-warm-agent-replica.service",
        ],
    },
    "sim-tp-ray": {
        "spark-1": [
            "gb10-ray-head.service",
            "gb10-vllm-tp.service",
            "gb10-watchdog-tp.service",
            "gb10-watchdog-tp.timer",
            "gb10-warm-agent-tp.socket",
            "gb10-warm-agent-tp.service",
        ],
        "spark-2": ["gb10-ray-worker.service", "gb10-watchdog-ray-worker.service", "gb10-watchdog-ray-worker.timer"],
    },
    # vLLM's own multi-node launch: the head serves, spark-2 runs the same argv --headless
    "sim-tp": {
        "spark-1": [
            "gb10-vllm-mp.service",
            "gb10-watchdog-mp.service",
            "gb10-watchdog-mp.timer",
            "gb10-warm-agent-mp.socket",
            "gb10-warm-agent-mp.service",
        ],
        "spark-2": ["gb10-vllm-mp-rank.service", "gb10-watchdog-mp-rank.service", "gb10-watchdog-mp-rank.timer"],
    },
}
# Each unit set conflicts with every other set's services (sorted): the replica, the Ray launcher's, the mp launcher's.
CONFLICTS = {
    "gb10-vllm.service": "Conflicts=gb10-ray-head.service gb10-ray-worker.service gb10-vllm-mp-rank.service "
    "gb10-vllm-mp.service gb10-vllm-tp.service",
    "gb10-ray-head.service": "Conflicts=gb10-vllm-mp-rank.service gb10-vllm-mp.service gb10-vllm.service",
    "gb10-ray-worker.service": "Conflicts=gb10-vllm-mp-rank.service gb10-vllm-mp.service gb10-vllm.service",
    "gb10-vllm-tp.service": "Conflicts=gb10-vllm-mp-rank.service gb10-vllm-mp.service gb10-vllm.service",
    "gb10-vllm-mp.service": "Conflicts=gb10-ray-head.service gb10-ray-worker.service gb10-vllm-tp.service "
    "gb10-vllm.service",
    "gb10-vllm-mp-rank.service": "Conflicts=gb10-ray-head.service gb10-ray-worker.service gb10-vllm-tp.service "
    "gb10-vllm.service",
}
SECRETS_ENV = "/etc/gb10/serving/secrets.env"


def _env_files(opts):
    return [opts[i + 1] for i, w in enumerate(opts) if w == "--env-file"]


def _command(argv):
    """The command a ``docker run`` argv runs in its container: its entrypoint, then the words after the image."""
    return [argv[argv.index("--entrypoint") + 1], *argv[argv.index(IMAGE) + 1 :]]


def _served(argv):
    """The plan's command in a ``docker run`` argv: the container's command less the secrets' loader, if any."""
    command = _command(argv)
    return command[len(LOADER) :] if command[: len(LOADER)] == LOADER else command


def _role_loops(plan, host):
    """What configure.yml loops over on ``host``: the role's own vars, templated by Ansible from the plan."""
    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar, trust_as_template

    role_vars = {
        **yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()),
        **yaml.safe_load((ROLE / "vars" / "main.yml").read_text()),
    }
    variables = {k: trust_as_template(v) if isinstance(v, str) else v for k, v in role_vars.items()}
    variables.update(gb10_plan=plan, inventory_hostname=host, gb10_warm_agent_port=8009)
    templar = Templar(loader=DataLoader(), variables=variables)
    return [
        templar.template(trust_as_template("{{ " + k + " }}"))
        for k in ("_serving_units", "_serving_node_watchdogs", "_serving_node_warms")
    ]


def test_units_render_from_the_sim_plans_with_the_plans_containers_conflicts_and_watchdogs():
    # Issue 15 item 2: the role writes what the plan names, rendered as the role's own table rendered it.
    seen = {}
    for profile, hosts in SIM_UNITS.items():
        plan = shipped_plan("sim", profile)
        assert plan["violations"] == [], profile
        for host in hosts:
            node = plan["nodes"][host]
            units, watchdogs, warms = _role_loops(plan, host)
            assert units == node["units"], (profile, host)
            assert warms == [unit for unit in units if unit["unit"] == node["engine_unit"]], (profile, host)
            written = []
            for unit in units:
                text = _render_plan_unit(plan, node, unit)
                lines = text.splitlines()
                assert CONFLICTS[unit["unit"]] in lines, (profile, host, unit["unit"])
                assert f"ExecStartPre=-/usr/bin/docker rm --force {unit['container']}" in lines
                if unit["warm"]:
                    # issue 19 item 5: every start and stop of the engine leaves it cold for its warm agent
                    assert f"ExecStartPre=-/bin/rm -f {unit['warm']['marker']}" in lines
                    assert f"ExecStopPost=-/bin/rm -f {unit['warm']['marker']}" in lines
                opts = _opts(_exec_start(text))
                assert opts[opts.index("--name") + 1] == unit["container"]
                if unit["template"] == "gb10-vllm-mp.service.j2":
                    # each rank runs its own argv from the plan; only the head, which serves the API, gets the secrets
                    assert _served(_exec_start(text)) == node["argv"], (profile, host)
                    assert (SECRETS_MOUNTS[0] in _mounts(opts)) == node["serves"], (profile, host)
                # issue 37 item 2: no unit passes the serving secrets as an env file (docker inspect shows those)
                assert SECRETS_ENV not in _env_files(opts), (profile, host, unit["unit"])
                if SECRETS_MOUNTS[0] in _mounts(opts):
                    assert _command(_exec_start(text))[: len(LOADER)] == LOADER, (profile, host, unit["unit"])
                written.append(unit["unit"])
            for watchdog in watchdogs:
                watched = node["engine_unit"] or units[0]["unit"]
                assert watchdog["unit"] == watched
                service = render_watchdog("service", watchdog, _serving_node_warms=warms, _serving_plan=plan)
                argv = _exec_start(service)
                assert argv[argv.index("--unit") + 1] == watched
                assert argv[argv.index("--restart") + 1] == ",".join(watchdog["restart"])
                assert ("--ray-container" in argv) == (node["role"] == "ray_head")
                # (a headless rank's probe is not settled yet: its --url and --raylet-healthz are not judged here)
                if node["role"] != "tp_rank":
                    assert ("--url" in argv) == bool(node["engine_unit"])
                    assert ("--raylet-healthz" in argv) == (node["role"] == "ray_worker")
                if node["engine_unit"]:
                    assert argv[argv.index("--marker") + 1] == warms[0]["warm"]["marker"]
                    assert argv[argv.index("--warmup-url") + 1] == WATCHDOG_VARS["_serving_chat_url"]
                    # the converge's warm-up (tasks/warmup.yml) sends this same message
                    assert argv[argv.index("--warmup-prompt") + 1] == "Say hello."
                else:
                    assert "--marker" not in argv
                assert f"RuntimeDirectory=gb10-watchdog-{watchdog['name']}" in service.splitlines()
                assert f"Description=gb10 serving watchdog for {watched}" in service
                assert "[Timer]" in render_watchdog("timer", watchdog)
                written += [watchdog["service"], watchdog["timer"]]
            for unit in warms:
                socket = render_warm_agent("socket", unit, gb10_fabric_address="192.168.200.11")
                assert "ListenStream=192.168.200.11:8009" in socket.splitlines()
                agent = render_warm_agent("service", unit)
                assert _exec_start(agent) == [AGENT_BIN, "--marker", unit["warm"]["marker"]]
                assert "DynamicUser=yes" in agent.splitlines() and unit["warm"]["service"] == unit["warm"][
                    "socket"
                ].replace(".socket", ".service")
                written += [unit["warm"]["socket"], unit["warm"]["service"]]
            assert sorted(written) == sorted(node["unit_names"]), (profile, host)
            seen.setdefault(profile, {})[host] = written
    assert seen == SIM_UNITS


def test_mp_units_run_the_head_with_node_rank_0_and_the_secrets_and_the_rank_headless_without_them():
    plan = shipped_plan("sim", "sim-tp")
    assert plan["violations"] == [] and plan["launcher"] == "mp"
    rendered = {}
    for host in ("spark-1", "spark-2"):
        node = plan["nodes"][host]
        [unit] = node["units"]
        assert unit["template"] == "gb10-vllm-mp.service.j2"
        text = _render_plan_unit(plan, node, unit, shm_size=node["shm_size"])
        argv = _exec_start(text)
        assert _served(argv) == node["argv"], host
        rendered[host] = (text.splitlines(), _opts(argv), _served(argv))
        # the head's container runs the plan's argv through the secrets' loader, the headless rank's runs it bare
        assert (_command(argv)[: len(LOADER)] == LOADER) == (host == "spark-1"), host
    head_lines, head_opts, head_cmd = rendered["spark-1"]
    rank_lines, rank_opts, rank_cmd = rendered["spark-2"]
    assert head_cmd[head_cmd.index("--node-rank") + 1] == "0" and "--headless" not in head_cmd
    assert rank_cmd[rank_cmd.index("--node-rank") + 1] == "1" and "--headless" in rank_cmd
    for cmd in (head_cmd, rank_cmd):
        assert cmd[:2] == ["vllm", "serve"] and cmd[cmd.index("--nnodes") + 1] == "2"
        assert cmd[cmd.index("--master-addr") + 1] == "10.77.0.11" and cmd[cmd.index("--master-port") + 1] == "29501"
    assert _env_files(head_opts) == _env_files(rank_opts) == ["/etc/gb10/serving/engine.env"]
    # the head gets the secrets through their loader (issue 37 item 2), the headless rank none and no loader
    assert _mounts(head_opts)[-2:] == SECRETS_MOUNTS and not set(SECRETS_MOUNTS) & set(_mounts(rank_opts))
    for lines, opts in ((head_lines, head_opts), (rank_lines, rank_opts)):
        # one unit set at a time on a node: starting the mp launch stops the Ray launch's units and the replica
        conflicts = next(line for line in lines if line.startswith("Conflicts=")).split("=", 1)[1].split()
        assert sorted(conflicts) == [
            "gb10-ray-head.service",
            "gb10-ray-worker.service",
            "gb10-vllm-tp.service",
            "gb10-vllm.service",
        ]
        # each rank's processes share one container: its own /dev/shm (vLLM's queues took 160 MiB on the sim model,
        # more than Docker's 64 MiB default; the size is the plan's, sim-tp's memory.shm_size 8g), no host IPC, no
        # --pid into a Ray head, no Ray token
        assert "--ipc" not in opts and opts[opts.index("--shm-size") + 1] == "8g" and "--pid" not in opts
        assert [opts[i + 1] for i, w in enumerate(opts) if w == "--cap-add"] == ["IPC_LOCK"]
        assert "/etc/gb10/serving/ray.env" not in opts and PLAN_MOUNTS_HF in opts
    # the warm marker is the head's alone: the headless rank serves nothing the proxy waits on
    assert "ExecStartPre=-/bin/rm -f /run/gb10-warm/mp" in head_lines
    assert not any("gb10-warm" in line for line in rank_lines)
