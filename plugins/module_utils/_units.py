# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Pure helpers for the serving units: the `docker run` argv of a serving container and its systemd quoting.

No Ansible import here; ``plugins/filter/serving_units.py`` is the Ansible face.
"""

from __future__ import annotations

import re

from ansible_collections.gb10.serving.plugins.module_utils._plan.rules_model import DIGEST_REF_RE

_BARE = re.compile(r"^[A-Za-z0-9_./:=@,+-]+\Z")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
# Flags that would carry a secret on the command line, where `ps`, `docker inspect` and the journal show it.
SECRET_FLAGS = ("--api-key", "--hf-token", "--token")
# Issue 37 item 2: the serving secrets never reach `docker run` as -e/--env-file, whose values `docker inspect` shows
# (Config.Env) to anyone in the node's docker group. The root-only secrets file is bind-mounted read-only at
# SECRETS_TARGET and the container's command is roles/serving's files/gb10-secrets-exec (bind-mounted read-only at
# SECRETS_EXEC_TARGET), run by the image's python3, which loads the file into its environment and exec()s the plan's
# argv unchanged. -I (isolated): the engine's PYTHONPATH and the working folder cannot shadow the stdlib it imports.
SECRETS_TARGET = "/run/gb10/secrets.env"
SECRETS_EXEC_TARGET = "/run/gb10/secrets-exec"
SECRETS_EXEC_PREFIX = ("python3", "-I", SECRETS_EXEC_TARGET, SECRETS_TARGET, "--")


def systemd_word(word):
    """One argv word as systemd's Exec= parser reads it back unchanged (quotes, backslashes, % and $)."""
    word = str(word)
    escaped = word.replace("%", "%%").replace("$", "$$")
    if _BARE.match(word):
        return escaped
    escaped = escaped.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{escaped}"'


def exec_line(argv):
    """An argv list as the value of ExecStart=/ExecStop=."""
    if not argv:
        raise ValueError("an Exec= line needs at least the program")
    return " ".join(systemd_word(word) for word in argv)


def env_file_lines(env):
    """`docker run --env-file` content: NAME=value per line, sorted; docker takes the value literally to the end of
    the line, so a newline in a value cannot be expressed and is refused."""
    lines = []
    for name in sorted(env):
        value = "" if env[name] is None else str(env[name])
        if not _ENV_NAME.match(str(name)):
            raise ValueError(f"{name!r} is not an environment variable name")
        if "\n" in value or "\r" in value:
            raise ValueError(f"the value of {name} holds a line break, which docker's --env-file cannot carry")
        lines.append(f"{name}={value}")
    return lines


def served_command(command):
    """The program a serving container runs (its Entrypoint + Cmd words), without the secrets wrapper that
    docker_run_argv puts in front of it where the container gets the serving secrets."""
    words = [str(word) for word in command]
    prefix = list(SECRETS_EXEC_PREFIX)
    return words[len(prefix) :] if words[: len(prefix)] == prefix else words


def docker_run_argv(
    name,
    image,
    argv,
    env_files=(),
    mounts=(),
    capabilities=(),
    gpus="",
    extra=(),
    ipc_host=False,
    shm_size="",
    secrets_file="",
    secrets_exec="",
):
    """The `docker run` of one serving container: host network, every capability dropped and only
    ``capabilities`` added back (a node refuses --privileged), no-new-privileges, removed on exit, Docker's init as
    PID 1 (--init, unless ``extra`` joins another PID namespace), the program given as --entrypoint so that the
    image's own ENTRYPOINT (the vLLM images' is `vllm serve`) cannot double it.

    secrets_file: the root-only env file of the serving secrets, never an --env-file (SECRETS_TARGET's comment):
    mounted read-only at SECRETS_TARGET with ``secrets_exec`` (the node's gb10-secrets-exec) at SECRETS_EXEC_TARGET,
    and the container runs SECRETS_EXEC_PREFIX + argv.

    ipc_host: the host's IPC namespace and /dev/shm (tensor-parallel: Ray's object store and vLLM's Ray driver
    share /dev/shm with the raylet); otherwise a private one of ``shm_size`` (Docker's default 64 MiB when empty).
    mounts: [{"source": host path, "target": container path, "read_only": bool}]
    """
    if not argv:
        raise ValueError(f"{name}: the plan gives no command for this container")
    if not DIGEST_REF_RE.match(str(image)):
        raise ValueError(f"{name}: image {image!r} is not pinned by digest (repository@sha256:...)")
    if secrets_file and not secrets_exec:
        raise ValueError(f"{name}: the secrets file needs the secrets-exec wrapper that loads it (secrets_exec)")
    if secrets_file and secrets_file in env_files:
        raise ValueError(f"{name}: the secrets file is also an --env-file: docker inspect would show its values")
    run = ["/usr/bin/docker", "run", "--rm", "--name", name, "--network", "host"]
    if not any(str(word).split("=", 1)[0] == "--pid" for word in extra):
        # Docker's init (tini) as PID 1, the engine its child: the kernel gives a PID namespace's init only the
        # signals it handles, and vLLM handles SIGTERM only once its imports are done, so as PID 1 a replica
        # stopped in its first seconds waited for them (measured with the simulation's vLLM 0.32 image: docker stop
        # 2 s into a start took 5 s, with --init 0 s); the init also reaps what vLLM's processes leave behind.
        # A container that joins another's PID namespace (--pid) is no init there: that namespace's init reaps.
        run += ["--init"]
    if ipc_host:
        run += ["--ipc", "host"]
    elif shm_size:
        run += ["--shm-size", str(shm_size)]
    run += ["--cap-drop", "ALL"]
    run += [arg for cap in sorted(set(capabilities)) for arg in ("--cap-add", cap)]
    # setuid binaries and file capabilities in the image gain nothing: the container keeps what it started with.
    run += ["--security-opt", "no-new-privileges"]
    if gpus:
        run += ["--gpus", str(gpus)]
    run += [arg for path in env_files for arg in ("--env-file", path)]
    for mount in mounts:
        spec = f"{mount['source']}:{mount['target']}" + (":ro" if mount.get("read_only") else "")
        run += ["--volume", spec]
    command = [str(word) for word in argv]
    if secrets_file:
        run += [
            "--volume",
            f"{secrets_file}:{SECRETS_TARGET}:ro",
            "--volume",
            f"{secrets_exec}:{SECRETS_EXEC_TARGET}:ro",
        ]
        command = [*SECRETS_EXEC_PREFIX, *command]
    run += list(extra)
    run += ["--entrypoint", command[0], str(image)]
    run += command[1:]
    return run


def secret_leaks(argv, secrets):
    """Problems where a secret would reach argv: a secret flag, or a secret's value as a word of argv."""
    problems = []
    words = [str(word) for word in argv]
    for word in words:
        flag = word.split("=", 1)[0]
        if flag in SECRET_FLAGS:
            problems.append(f"{flag} is on the command line; pass the secret through serving_secrets instead")
    for name, value in sorted((secrets or {}).items()):
        if value not in (None, "") and any(str(value) in word for word in words):
            problems.append(f"the value of secret {name} appears in the command line")
    return problems


# The kinds of a node's unit files and, for a unit's companions, their parts in the order they are written: a warm
# agent's service before its socket (systemd-analyze refuses a socket whose service it cannot load).
UNIT_FILE_KINDS = {"units": (), "watchdogs": ("service", "timer"), "warm": ("service", "socket")}


def unit_template_files(units, kind, folder="/etc/systemd/system"):
    """gb10.serving.node_templates' files for a node's plan units (plugins/module_utils/_plan/units.py): ``units``
    their own unit files (template ``template``, ``item`` the unit); ``watchdogs`` each unit's watchdog service and
    timer (``item`` the pair (watchdog, 'service'|'timer'), as the templates read it); ``warm`` each given unit's warm
    agent service and socket (``item`` (unit, 'service'|'socket')). Each file is validated by systemd-analyze under
    its unit name."""
    if kind not in UNIT_FILE_KINDS:
        raise ValueError(f"unit_template_files: kind {kind!r} is none of {sorted(UNIT_FILE_KINDS)}")

    def entry(src, name, item):
        return {
            "src": src,
            "dest": f"{folder}/{name}",
            "mode": "0644",
            "validate": f"systemd-analyze verify %s:{name}",
            "vars": {"item": item},
        }

    if kind == "units":
        return [entry(unit["template"], unit["unit"], unit) for unit in units]
    found = []
    for unit in units:
        if kind == "watchdogs" and unit.get("watchdog"):
            found += [
                entry(f"gb10-watchdog.{p}.j2", unit["watchdog"][p], [unit["watchdog"], p])
                for p in UNIT_FILE_KINDS[kind]
            ]
        elif kind == "warm" and unit.get("warm"):
            found += [entry(f"gb10-warm-agent.{p}.j2", unit["warm"][p], [unit, p]) for p in UNIT_FILE_KINDS[kind]]
    return found
