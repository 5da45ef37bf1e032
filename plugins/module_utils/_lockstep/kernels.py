# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Kernels on the node: which ones are installed, which one the next boot takes, which ones the metapackages target
and which ones have ``nvidia.ko`` on disk."""

from __future__ import annotations

import posixpath
import re

from .debversion import compare_versions, version_key
from .naming import modules_package_name, split_release
from .parse import parse_depends

_IMAGE_RE = re.compile(r"^linux-image-(?:unsigned-)?(?P<release>[0-9][^\s]*)$")

_NVIDIA_KO_RE = re.compile(r"^nvidia\.ko(?:\.(?:zst|xz|gz|bz2|lz4))?$")


def modules_target_release(depends, branch, variant):
    """The kernel release a modules metapackage targets, read from its ``Depends`` (text or parsed list)."""
    if isinstance(depends, str):
        depends = parse_depends(depends)
    prefix = modules_package_name(branch, variant, "")
    for dep in depends:
        release = dep["name"][len(prefix) :] if dep["name"].startswith(prefix) else ""
        if split_release(release)[0]:
            return release
    return None


def image_target_release(depends):
    """The kernel release a ``linux-image-<meta flavour>`` metapackage targets, read from its ``Depends``."""
    if isinstance(depends, str):
        depends = parse_depends(depends)
    for dep in depends:
        match = _IMAGE_RE.match(dep["name"])
        if match and split_release(match.group("release"))[0]:
            return match.group("release")
    return None


def installed_kernels(packages):
    """``{release: package version}`` for every ``linux-image-<release>`` whose files are on disk."""
    kernels = {}
    for name, record in packages.items():
        match = _IMAGE_RE.match(name)
        if not match or not record.get("on_disk"):
            continue
        release = match.group("release")
        if not split_release(release)[0]:
            continue
        version = record.get("version", "")
        if release not in kernels or compare_versions(version, kernels[release]) > 0:
            kernels[release] = version
    return kernels


def next_boot_kernel(kernels):
    """The release the next boot takes: the highest installed kernel (DGX Spark boots the highest).

    Ordered by the image package's Debian version, ties (two flavours of one ABI) broken by the release string in
    Debian version ordering. ``None`` when no kernel image is installed.
    """
    if not kernels:
        return None
    return max(kernels, key=lambda release: (version_key(kernels[release]), version_key(release)))


def nvidia_module_paths(relative_paths):
    """The ``nvidia.ko*`` files among paths relative to ``/lib/modules/<release>``.

    Accepted where Ubuntu's prebuilt packages (``kernel/nvidia-<branch>[-open]/``) and DKMS (``updates/dkms/``)
    put them, plus ``updates/`` and ``extra/``; any compression suffix kmod understands.
    """
    found = []
    for path in relative_paths:
        path = path.lstrip("/")
        directory, base = posixpath.split(path)
        if not _NVIDIA_KO_RE.match(base):
            continue
        parts = directory.split("/") if directory else []
        if not parts:
            continue
        if parts[0] in ("updates", "extra") or (
            parts[0] == "kernel" and len(parts) > 1 and parts[1].startswith("nvidia")
        ):
            found.append(path)
    return sorted(found)
