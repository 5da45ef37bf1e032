# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The prebuild stamp written beside a finished module, and whether the cache holds the module a node wants."""

from __future__ import annotations

from .cache_layout import arch_dir, capability, moe_module_name

# The options of the modules that judge an image's stamps in a node's cache (doc fragment
# gb10.serving.flashinfer_stamps and gb10.serving.node document them; the three change together).
STAMPS_ARGUMENT_SPEC = {
    "node": {"type": "str", "required": True},
    "cache_dir": {"type": "path", "required": True},
    "image": {"type": "str", "required": True},
}


def stamp(image_digest, flashinfer_version, compute_capability, library_sha256, max_jobs_used, seconds, **identity):
    """The record written beside a finished module: what it was built for and by what.

    identity: ninja_sha256 (the build.ninja the prebuild wrote) and ninja_log_summary's figures, as the prebuild
    entry point records them.
    """
    return identity | {
        "image_digest": image_digest,
        "flashinfer_version": flashinfer_version,
        "arch": arch_dir(compute_capability),
        "compute_capability": "{}.{}".format(*capability(compute_capability)),
        "module": moe_module_name(compute_capability),
        "library_sha256": library_sha256,
        "max_jobs": max_jobs_used,
        "build_seconds": seconds,
    }


_UNSET = object()


def cache_state(wanted, found_stamp, library_sha256, ninja_sha256=_UNSET):
    """Is the module in the cache for (image digest, flashinfer version, arch)?

    ``wanted``: dict with image_digest, flashinfer_version, compute_capability. ``found_stamp``: the parsed stamp or
    None. ``library_sha256``: the .so's checksum, or None when the file is missing. ``ninja_sha256``: the checksum
    of the build.ninja on the node (None when missing); given, the stamp must record the same (issue 17: the build's
    own identity; the serving unit's is compared afterwards, in its own container). Returns (present, reason).
    """
    # A prebuilt stamp (issue 38 item 4): the module lives in the image (its digest pins the bytes), not the cache.
    prebuilt = bool(found_stamp) and found_stamp.get("kind") == "prebuilt"
    if library_sha256 is None and not prebuilt:
        return False, "the module library is not in the cache"
    if not found_stamp:
        return False, "the module library is there but carries no prebuild stamp (built by someone else, or cut short)"
    expect = {
        "image_digest": wanted["image_digest"],
        "flashinfer_version": wanted["flashinfer_version"],
        "arch": arch_dir(wanted["compute_capability"]),
        "module": moe_module_name(wanted["compute_capability"]),
    }
    for key, value in expect.items():
        if found_stamp.get(key) != value:
            return False, f"stamp {key} is {found_stamp.get(key)!r}, wanted {value!r}"
    if prebuilt:
        paths = ", ".join(item.get("path", "?") for item in found_stamp.get("aot") or [])
        if not paths:
            return False, "the prebuilt stamp names no prebuilt module: the prebuild re-checks the image"
        return True, f"{expect['module']} prebuilt in the image ({paths}), {expect['image_digest']}"
    if found_stamp.get("library_sha256") != library_sha256:
        return False, "the module library changed since it was stamped"
    if ninja_sha256 is not _UNSET:
        if not found_stamp.get("ninja_sha256"):
            return False, "the stamp records no build.ninja sha256 (stamped before issue 17): the prebuild re-checks it"
        if found_stamp["ninja_sha256"] != ninja_sha256:
            return False, "build.ninja changed since the prebuild (a process with another environment rewrote it)"
    return (
        True,
        f"{expect['module']} for {expect['arch']}, flashinfer {expect['flashinfer_version']}, {expect['image_digest']}",
    )
