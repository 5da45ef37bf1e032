# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Filters that turn the serving plan's argv into systemd unit lines.

Each filter's documentation is its own sidecar file (plugins/filter/<filter name>.yml): ansible-doc reads a
DOCUMENTATION here for every filter of the file, so this file holds none.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.gb10.serving.plugins.module_utils._deferred import module_utils

_units = module_utils("_units")


def _wrap(func, *args, **kwargs):
    try:
        return func(*args, **kwargs)
    except ValueError as err:
        raise AnsibleFilterError(str(err)) from err


def systemd_exec(argv):
    return _wrap(_units.exec_line, list(argv))


def serving_docker_run(
    argv,
    name,
    image,
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
    return _wrap(
        _units.docker_run_argv,
        name,
        image,
        list(argv),
        env_files,
        mounts,
        capabilities,
        gpus,
        extra,
        ipc_host,
        shm_size,
        secrets_file,
        secrets_exec,
    )


def docker_env_file(env):
    return "\n".join(_wrap(_units.env_file_lines, dict(env)))


def serving_secret_leaks(argv, secrets):
    return _units.secret_leaks(list(argv), dict(secrets or {}))


def serving_unit_templates(units, kind, folder="/etc/systemd/system"):
    return _wrap(_units.unit_template_files, list(units), kind, folder)


class FilterModule:
    def filters(self):
        return {
            "systemd_exec": systemd_exec,
            "serving_docker_run": serving_docker_run,
            "docker_env_file": docker_env_file,
            "serving_secret_leaks": serving_secret_leaks,
            "serving_unit_templates": serving_unit_templates,
        }
