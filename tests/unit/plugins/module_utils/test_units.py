# Copyright: gb10.serving maintainers
# Apache-2.0
"""Serving unit helpers: systemd Exec= quoting and the serving containers' docker run argv."""

from __future__ import annotations

import shlex

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import _units

IMAGE = "registry:5000/gb10/vllm-standin@sha256:" + "a" * 64
SPEC = '{"method":"mtp","num_speculative_tokens":4}'


def test_systemd_quoting_keeps_json_specifiers_and_variables_intact():
    line = _units.exec_line(["vllm", "--speculative-config", SPEC, "100%", "$HOME", "a b"])
    assert (
        line
        == 'vllm --speculative-config "{\\"method\\":\\"mtp\\",\\"num_speculative_tokens\\":4}" "100%%" "$$HOME" "a b"'
    )
    # systemd unquotes like a shell for these characters once %% and $$ are read back
    assert shlex.split(line.replace("%%", "%").replace("$$", "$")) == [
        "vllm",
        "--speculative-config",
        SPEC,
        "100%",
        "$HOME",
        "a b",
    ]


def test_docker_run_uses_host_network_drops_caps_entrypoint_and_digest():
    argv = _units.docker_run_argv(
        "gb10-vllm",
        IMAGE,
        ["vllm", "serve", "/root/.cache/huggingface/hub/x", "--port", "8000"],
        env_files=["/etc/gb10/serving/engine.env", "/etc/gb10/serving/secrets.env"],
        mounts=[{"source": "/var/lib/gb10/hf-cache", "target": "/root/.cache/huggingface", "read_only": True}],
        shm_size="8g",
    )
    assert argv[:8] == ["/usr/bin/docker", "run", "--rm", "--name", "gb10-vllm", "--network", "host", "--init"]
    # a replica: a private IPC namespace with a /dev/shm of its own size, every capability dropped
    assert argv[8:14] == ["--shm-size", "8g", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
    assert "--ipc" not in argv and "--cap-add" not in argv
    assert "--privileged" not in argv and "--gpus" not in argv
    assert argv[argv.index("--entrypoint") : argv.index(IMAGE) + 1] == ["--entrypoint", "vllm", IMAGE]
    assert argv[argv.index(IMAGE) + 1 :] == ["serve", "/root/.cache/huggingface/hub/x", "--port", "8000"]
    assert argv.count("--env-file") == 2
    assert "/var/lib/gb10/hf-cache:/root/.cache/huggingface:ro" in argv


def test_engine_is_not_pid_1_so_a_replica_stopped_as_it_starts_stops_on_sigterm():
    """PID 1 of a PID namespace gets only the signals it handles, and vLLM handles SIGTERM only once its imports are
    done: as PID 1 a replica stopped in its first seconds waited for them (measured: 5 s, with --init 0 s). Docker's
    init is PID 1 of every serving container that has a PID namespace of its own; one that joins another's has none."""
    for extra, init in (((), True), (["--pid", "container:gb10-ray-head"], False), (["--pid=host"], False)):
        argv = _units.docker_run_argv("gb10-vllm", IMAGE, ["vllm", "serve", "/m"], extra=extra)
        assert ("--init" in argv) is init, (extra, argv)
        if init:
            assert argv.index("--init") < argv.index("--entrypoint"), argv


def test_pitfall_secret_in_docker_inspect_the_secrets_file_is_mounted_and_loaded_never_an_env_file():
    """Issue 37 item 2: -e/--env-file values are the container's Config.Env, which `docker inspect` shows to the
    node's docker group. The secrets file is mounted read-only and loaded by gb10-secrets-exec, which execs the plan's
    argv unchanged; the argv holds no value, only paths."""
    plan_argv = ["vllm", "serve", "/m", "--port", "8000"]
    argv = _units.docker_run_argv(
        "gb10-vllm",
        IMAGE,
        plan_argv,
        env_files=["/etc/gb10/serving/engine.env"],
        secrets_file="/etc/gb10/serving/secrets.env",
        secrets_exec="/usr/local/libexec/gb10-secrets-exec",
        extra=["--pid", "container:gb10-ray-head"],
    )
    assert [argv[i + 1] for i, w in enumerate(argv) if w == "--env-file"] == ["/etc/gb10/serving/engine.env"]
    volumes = [argv[i + 1] for i, w in enumerate(argv) if w == "--volume"]
    assert volumes == [
        "/etc/gb10/serving/secrets.env:/run/gb10/secrets.env:ro",
        "/usr/local/libexec/gb10-secrets-exec:/run/gb10/secrets-exec:ro",
    ]
    # the extra options stay options: before --entrypoint
    assert argv.index("--pid") < argv.index("--entrypoint")
    assert argv[argv.index("--entrypoint") : argv.index(IMAGE) + 1] == ["--entrypoint", "python3", IMAGE]
    command = ["python3", *argv[argv.index(IMAGE) + 1 :]]
    assert command == ["python3", "-I", "/run/gb10/secrets-exec", "/run/gb10/secrets.env", "--", *plan_argv]
    # what the rolling upgrade compares with the plan (the running container's Entrypoint + Cmd)
    assert _units.served_command(command) == plan_argv and _units.served_command(plan_argv) == plan_argv
    # without a secrets file nothing changes: the program is the entrypoint
    bare = _units.docker_run_argv("gb10-vllm-mp-rank", IMAGE, plan_argv, env_files=["/etc/gb10/serving/engine.env"])
    assert bare[bare.index("--entrypoint") + 1] == "vllm" and "/run/gb10/secrets.env" not in " ".join(bare)
    with pytest.raises(ValueError, match="also an --env-file: docker inspect"):
        _units.docker_run_argv(
            "x", IMAGE, plan_argv, env_files=["/s.env"], secrets_file="/s.env", secrets_exec="/usr/local/libexec/x"
        )
    with pytest.raises(ValueError, match="secrets-exec"):
        _units.docker_run_argv("x", IMAGE, plan_argv, secrets_file="/s.env")


def test_docker_run_tensor_parallel_host_ipc_and_only_the_caps_given():
    argv = _units.docker_run_argv(
        "gb10-ray-head",
        IMAGE,
        ["ray", "start", "--head"],
        capabilities=["IPC_LOCK", "IPC_LOCK"],
        ipc_host=True,
        shm_size="8g",
    )
    assert argv[7:16] == [
        "--init",
        "--ipc",
        "host",
        "--cap-drop",
        "ALL",
        "--cap-add",
        "IPC_LOCK",
        "--security-opt",
        "no-new-privileges",
    ]
    assert "--shm-size" not in argv  # the host's /dev/shm: a size would not apply


def test_docker_run_refuses_a_tag_and_an_empty_command():
    with pytest.raises(ValueError, match="not pinned by digest"):
        _units.docker_run_argv("gb10-vllm", "vllm/vllm-openai:latest", ["vllm", "serve"])
    with pytest.raises(ValueError, match="no command"):
        _units.docker_run_argv("gb10-ray-worker", IMAGE, [])


def test_env_file_lines_sorted_and_refuses_line_breaks():
    assert _units.env_file_lines({"B": "2", "A": 1}) == ["A=1", "B=2"]
    with pytest.raises(ValueError, match="line break"):
        _units.env_file_lines({"HF_TOKEN": "abc\ndef"})
    with pytest.raises(ValueError, match="not an environment variable name"):
        _units.env_file_lines({"A-B": "1"})


def test_pitfall_secret_on_the_command_line():
    secrets = {"VLLM_API_KEY": "sk-local-123"}
    assert _units.secret_leaks(["vllm", "serve", "/m", "--port", "8000"], secrets) == []
    leaks = _units.secret_leaks(["vllm", "serve", "/m", "--api-key", "sk-local-123"], secrets)
    assert len(leaks) == 2 and "--api-key" in leaks[0] and "VLLM_API_KEY" in leaks[1]
    assert _units.secret_leaks(["vllm", "serve", "/m", "--api-key=x"], {}) != []


def test_pitfall_trailing_newline_passes_a_dollar_anchor():
    # Python's `$` matches before a final newline: with it, "serve\n" counted as a bare word and reached the unit
    # unquoted, a line break in ExecStart=. Every validating pattern ends in \Z (issue 37 item 4).
    assert _units.systemd_word("serve\n") == '"serve\\n"'
    assert _units.exec_line(["vllm", "serve\n"]) == 'vllm "serve\\n"'


def test_unit_template_files_write_each_units_file_its_watchdog_and_warm_agent_service_before_socket():
    unit = {
        "unit": "gb10-vllm.service",
        "template": "gb10-vllm.service.j2",
        "watchdog": {"service": "gb10-watchdog-replica.service", "timer": "gb10-watchdog-replica.timer"},
        "warm": {"service": "gb10-warm-agent.service", "socket": "gb10-warm-agent.socket"},
    }
    rank = {"unit": "gb10-ray-worker.service", "template": "gb10-ray.service.j2", "watchdog": None, "warm": None}
    own = _units.unit_template_files([unit, rank], "units")
    assert [(f["src"], f["dest"]) for f in own] == [
        ("gb10-vllm.service.j2", "/etc/systemd/system/gb10-vllm.service"),
        ("gb10-ray.service.j2", "/etc/systemd/system/gb10-ray-worker.service"),
    ]
    assert own[0]["vars"] == {"item": unit} and own[0]["validate"] == "systemd-analyze verify %s:gb10-vllm.service"
    watchdogs = _units.unit_template_files([unit, rank], "watchdogs", folder="/x")
    assert [(f["src"], f["dest"], f["vars"]["item"][1]) for f in watchdogs] == [
        ("gb10-watchdog.service.j2", "/x/gb10-watchdog-replica.service", "service"),
        ("gb10-watchdog.timer.j2", "/x/gb10-watchdog-replica.timer", "timer"),
    ]
    assert watchdogs[0]["vars"]["item"][0] is unit["watchdog"]
    # systemd-analyze refuses a socket whose service it cannot load: the service is written first
    warm = _units.unit_template_files([unit, rank], "warm")
    assert [f["dest"].rsplit("/", 1)[1] for f in warm] == ["gb10-warm-agent.service", "gb10-warm-agent.socket"]
    assert all(f["mode"] == "0644" and f["vars"]["item"][0] is unit for f in warm)
    with pytest.raises(ValueError, match="kind 'sockets' is none of"):
        _units.unit_template_files([unit], "sockets")
