# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Built once per cluster (issue 17): one node of each (image digest, arch, ...) group builds, the others receive its
cache folder's module files over the fabric (the model_weights role's transfer script, --layout files)."""

from __future__ import annotations

import json
import os
import re

from .build_identity import sha256_text
from .cache_layout import STAMP_NAME, arch_dir

# What reaches build.ninja besides the image and the cache's container path (flashinfer 0.6.18 jit/cpp_ext.py: -ccbin
# $CC, cxx, cuda_home, FLASHINFER_EXTRA_*FLAGS, the launchers, FLASHINFER_CUDA_ARCH_LIST): nodes whose values differ
# write different build.ninja files, so a module built on one would be rebuilt by the other's serving unit.
NINJA_ENV_NAMES = ("CC", "CXX", "CUDA_HOME", "CUDA_PATH")

NINJA_ENV_PREFIX = "FLASHINFER_"

# Never sent: partial files of a transfer or a stamp write, and flashinfer's build locks.
_SHARE_SKIP_SUFFIXES = (".gb10-incomplete", ".tmp", ".lock")


def ninja_env(env):
    """The variables of a node's environment that reach build.ninja, sorted."""
    return {
        key: str(value)
        for key, value in sorted((env or {}).items())
        if key in NINJA_ENV_NAMES or key.startswith(NINJA_ENV_PREFIX)
    }


def share_key(image_digest, flashinfer_version, compute_capability, workspace_base, env):
    """What two nodes must have in common for one's prebuilt module to be the other's: the image digest, flashinfer
    version, arch, the cache's container path (build.ninja holds absolute paths under it) and the build.ninja
    variables. A JSON string, so it compares and travels through hostvars as one value."""
    return json.dumps(
        {
            "image_digest": image_digest,
            "flashinfer_version": flashinfer_version,
            "arch": arch_dir(compute_capability),
            "workspace_base": str(workspace_base).rstrip("/"),
            "env": ninja_env(env),
        },
        sort_keys=True,
        separators=(",", ":"),
    )


def share_roles(nodes):
    """Which node builds the module, which receive it and from where.

    nodes: in inventory order, each {"name", "key" (share_key), "has" (a valid stamp for the key now, or obtained
    earlier in this run), "due" (runs the role now and lacks the module)}. A due node receives from the first node
    of its key that has the module (a node that already serves it keeps serving: the transfer only reads its files);
    with none, the first due node of its key builds and the others receive from it. Returns {name: {"action":
    "present" | "build" | "receive", "source", "key"}} for every node that has or is due.
    """
    roles, builders = {}, {}
    holders = {}
    for node in nodes:
        if node.get("has"):
            holders.setdefault(node["key"], node["name"])
    for node in nodes:
        name, key = node["name"], node["key"]
        if node.get("has"):
            roles[name] = {"action": "present", "source": None, "key": key}
        elif node.get("due"):
            if key in holders:
                roles[name] = {"action": "receive", "source": holders[key], "key": key}
            elif key in builders:
                roles[name] = {"action": "receive", "source": builders[key], "key": key}
            else:
                builders[key] = name
                roles[name] = {"action": "build", "source": None, "key": key}
    return roles


_BUILD_LINE_RE = re.compile(r"^build\s+(?P<outs>.+?)(?<!\$):\s*(?P<rule>\S+)\s*(?P<ins>.*)$")


def ninja_input_dirs(ninja_text, workspace):
    """Folders under ``workspace`` (container paths) that hold inputs of build.ninja's statements: the sources
    flashinfer generates into the cache (``generated/cutlass_instantiations/<arch>``), relative to ``workspace``.

    A receiving node needs them with the builder's mtimes: write_if_different leaves an equal file alone, but a
    missing one is written now, newer than every object, and ninja rebuilds each unit."""
    text = re.sub(r"\$\n\s*", " ", ninja_text or "")
    base = str(workspace).rstrip("/") + "/"
    folders = set()
    for line in text.splitlines():
        match = _BUILD_LINE_RE.match(line)
        if not match:
            continue
        for path in match["ins"].split("||")[0].replace(" | ", " ").split():
            if path.startswith(base):
                folders.add(os.path.dirname(path[len(base) :]))
    return sorted(folder for folder in folders if folder)


def share_file_wanted(relative):
    """Whether a file of the module's folders is part of what is sent."""
    return not os.path.basename(relative).endswith(_SHARE_SKIP_SUFFIXES)


def share_manifest(node, files, stamp_data, module, ninja_text):
    """The manifest a builder sends, checked against its stamp. Returns (manifest, problems).

    files: {path relative to the arch workspace: {"size", "sha256", "mtime_ns"}} of the module's build folder and
    the folders holding its generated inputs. What the serving unit's load needs for "ninja: no work to do": the
    .so and build.ninja the stamp records (by sha256), .ninja_log (the command of every output), .ninja_deps when
    build.ninja has ``deps =`` (without it ninja rebuilds each unit), the objects, the generated sources, the stamp.
    """
    problems = []
    build_dir = f"cached_ops/{module}"
    manifest = {path: dict(entry) for path, entry in sorted((files or {}).items()) if share_file_wanted(path)}
    stamp_data = stamp_data or {}
    need = {
        f"{build_dir}/{module}.so": stamp_data.get("library_sha256"),
        f"{build_dir}/build.ninja": stamp_data.get("ninja_sha256"),
        f"{build_dir}/.ninja_log": None,
        f"{build_dir}/{STAMP_NAME}": None,
    }
    if re.search(r"^\s*deps\s*=", ninja_text or "", re.MULTILINE):
        need[f"{build_dir}/.ninja_deps"] = None
    for path, sha in need.items():
        entry = manifest.get(path)
        if entry is None:
            problems.append(f"{node}: {path} is missing from the module's cache folder")
        elif path.endswith(".ninja_log") and sha256_text("") == entry.get("sha256"):
            problems.append(f"{node}: {path} is empty")
        elif sha is not None and entry.get("sha256") != sha:
            problems.append(
                f"{node}: {path} sha256 {str(entry.get('sha256'))[:12]} differs from the stamp's {str(sha)[:12]}"
            )
    if not stamp_data.get("library_sha256") or not stamp_data.get("ninja_sha256"):
        problems.append(f"{node}: the stamp records no .so or build.ninja sha256 (a stamp from before issue 17)")
    if problems:
        problems.append(
            f"{node} cannot give its {module} to another node: run the flashinfer_jit role on {node} alone first "
            "(it rebuilds a module whose stamp does not hold)"
        )
    return manifest, problems


def share_outcome(node, source, seconds, present, reason):
    """The line a receiving node reports after the copy, and whether it holds (the plan module's verdict on the
    received stamp, .so and build.ninja)."""
    if present:
        return {"ok": True, "msg": f"{node}: module received from {source} in {seconds:.1f} s, not built: {reason}"}
    return {
        "ok": False,
        "msg": (
            f"{node}: the module received from {source} does not hold: {reason}. Run the role again (the copy is "
            f"repeated), or remove {STAMP_NAME} on {node} to build there"
        ),
    }
