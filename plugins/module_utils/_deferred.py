# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The collection's module_utils imported at their first use, for its filter plugins.

ansible-core finds a collection's filter by loading every filter file of that collection (ansible-core 2.19
`plugins/loader.py`, `Jinja2Loader.get_with_context` runs `pkgutil.iter_modules` over `plugins/filter` and loads
each file), and it does so in each task's worker process, forked from a main process that never loaded them: what a
filter file imports at its top is paid again by every task that uses any gb10.serving filter. The plan package
(`_plan`, through `_units` and `_serving_image`) and `ansible.module_utils.urls` (through `_ladder`'s load generator)
made that about 0.1 s a task here (docs/converge-cost.md). A filter file names its module_utils with ``module_utils``
and pays for one only when a filter of its own runs.
"""

from __future__ import annotations

import importlib

_PACKAGE = "ansible_collections.gb10.serving.plugins.module_utils"


class DeferredModule:
    """Stands for a module until an attribute is read; then every read is the imported module's own."""

    __slots__ = ("_name",)

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attribute):
        return getattr(importlib.import_module(self._name), attribute)

    def __repr__(self):
        return f"<deferred module {self._name!r}>"


def module_utils(name):
    """The collection's ``plugins/module_utils/<name>`` (dotted for a package's module), imported at first use."""
    return DeferredModule(f"{_PACKAGE}.{name}")
