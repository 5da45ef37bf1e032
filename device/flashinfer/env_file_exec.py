#!/usr/bin/env python
"""Run a command with this environment plus a Docker --env-file and KEY=VALUE overrides, as `docker run` gives it.

Usage: env_file_exec.py ENV_FILE [KEY=VALUE ...] -- COMMAND [ARG ...]

The device machine has no Docker engine: the serving unit's and the build container's environment reach the process
as `docker run --env-file` passes them (docs.docker.com, "docker container run", --env-file: one VAR=VAL a line,
taken literally, no quotes removed; `#` lines and blank lines skipped; a bare VAR takes the caller's value), over the
machine's own environment in the place of the image's ENV.
"""

import os
import sys


def env_file(path):
    values = {}
    with open(path) as handle:
        for raw in handle:
            line = raw.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            key, sep, value = line.partition("=")
            if sep:
                values[key] = value
            elif key in os.environ:
                values[key] = os.environ[key]
    return values


def main(argv):
    if "--" not in argv or len(argv) < 3:
        sys.exit(__doc__.splitlines()[2])
    split = argv.index("--")
    path, overrides, command = argv[0], argv[1:split], argv[split + 1 :]
    env = dict(os.environ) | env_file(path)
    env.update(item.split("=", 1) for item in overrides)
    os.execvpe(command[0], command, env)


if __name__ == "__main__":
    main(sys.argv[1:])
