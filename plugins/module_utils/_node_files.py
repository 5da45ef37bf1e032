# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Files of the collection installed on a node in one module run (gb10.serving.node_files).

A program the nodes run beside a module_utils package it imports (weights_transfer.py and the _weights package, the
watchdog and _admission.py) is several files; ansible.builtin.copy costs two module runs a file even when nothing
changes (its stat, then file for the attributes), about a second a file on the simulation (docs/converge-cost.md).
The action plugin reads the sources on the controller and the module compares and writes them all on the node.
"""

from __future__ import annotations

import fnmatch
import os

# Never installed from a source folder: interpreter caches and hidden files of a checkout.
SKIPPED_DIRS = ("__pycache__",)
SKIPPED_FILES = ("*.pyc", "*.pyo", ".*")


def source_files(src, dest):
    """[(controller file, node path)] of one source: a file lands as ``dest``/<its name>; a folder as
    ``dest``/<its name>/<its files, and its subfolders' below it>, in name order, interpreter caches and hidden
    names left out."""
    src = os.path.normpath(src)
    name = os.path.basename(src)
    if not os.path.isdir(src):
        return [(src, os.path.join(dest, name))]
    found = []
    for folder, dirs, files in os.walk(src):
        dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.startswith("."))
        for file in sorted(files):
            if any(fnmatch.fnmatch(file, pattern) for pattern in SKIPPED_FILES):
                continue
            path = os.path.join(folder, file)
            found.append((path, os.path.join(dest, name, os.path.relpath(path, src))))
    return found


def duplicate_targets(pairs):
    """The node paths that two sources would both write (a refusal: one would silently win)."""
    seen, twice = set(), []
    for _src, path in pairs:
        if path in seen and path not in twice:
            twice.append(path)
        seen.add(path)
    return twice


def tree_folders(paths, dest):
    """The folders strictly below ``dest`` that hold ``paths`` (absolute, below ``dest``), parents first: the folders
    of the installed tree, which carry its folder mode, owner and group as its files carry theirs."""
    found = []
    for path in paths:
        chain, parent = [], os.path.dirname(path)
        while parent.startswith(dest + os.sep):
            chain.append(parent)
            parent = os.path.dirname(parent)
        found += [folder for folder in reversed(chain) if folder not in found]
    return found


def missing_parents(paths, exists):
    """The folders to make, parents first, for ``paths`` (absolute) where ``exists(folder)`` is false."""
    wanted = []
    for path in paths:
        parent = os.path.dirname(path)
        chain = []
        while parent and parent != os.path.dirname(parent) and not exists(parent):
            chain.append(parent)
            parent = os.path.dirname(parent)
        for folder in reversed(chain):
            if folder not in wanted:
                wanted.append(folder)
    return wanted
