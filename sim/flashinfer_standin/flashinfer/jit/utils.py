"""write_if_different as flashinfer 0.6.18 jit/utils.py: a file is rewritten only when its content changes."""

import pathlib


def write_if_different(path, content):
    path = pathlib.Path(path)
    if path.exists():
        with open(path) as handle:
            if handle.read() == content:
                return
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        handle.write(content)
