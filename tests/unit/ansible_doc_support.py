# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""ansible-doc run against one collections path, shared by the plugin and role docs tests.

GB10_DOCS_COLLECTIONS_PATH points the tests at another collections path (scripts/check_package.sh: the collection
installed from its built tarball); by default they read the installed copy they sit in, or the checkout through
collections/ (make collections).
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]


def _collections_path():
    if os.environ.get("GB10_DOCS_COLLECTIONS_PATH"):
        return Path(os.environ["GB10_DOCS_COLLECTIONS_PATH"])
    if CHECKOUT.parent.parent.name == "ansible_collections":
        return CHECKOUT.parents[2]  # an installed copy (ansible-test units, the built tarball)
    return CHECKOUT / "collections"  # the checkout, linked in by make collections


COLLECTIONS_PATH = _collections_path()
COLLECTION = COLLECTIONS_PATH / "ansible_collections" / "gb10" / "serving"


@cache
def _empty_config():
    folder = tempfile.mkdtemp(prefix="gb10-docs-")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = Path(folder) / "ansible.cfg"
    path.write_text("[defaults]\n")
    return str(path)


def doc_env():
    """The environment of an ansible-doc that sees only COLLECTIONS_PATH: not the checkout's ansible.cfg, not a
    collection installed into site-packages."""
    env = dict(os.environ)
    env.update(
        ANSIBLE_CONFIG=_empty_config(),
        ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS_PATH),
        ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_FORCE_COLOR="0",
    )
    return env


def ansible_doc(*args):
    found = Path(sys.executable).with_name("ansible-doc")
    binary = str(found) if found.exists() else (shutil.which("ansible-doc") or "ansible-doc")
    return subprocess.run(
        [binary, *args], capture_output=True, text=True, env=doc_env(), cwd=COLLECTIONS_PATH, check=False
    )
