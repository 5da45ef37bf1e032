"""Scripts of the tree (a role's files/, sim/) loaded as modules by their path: none of their folders is a package."""

from __future__ import annotations

import importlib.util
import sys


def load(name, path):
    """The module at ``path`` as ``name``, registered in sys.modules before it runs, as an import would (a
    dataclass it defines looks its module up there)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
