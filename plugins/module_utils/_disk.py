"""Free disk for the model weights: which mount holds the cache, and whether what is missing fits there.

The rule and its message are _weights/disk.py's disk_shortfall, which the transfer script applies again in its container
right before it writes (GIB is re-exported here for the callers of this module)."""

from __future__ import annotations

import posixpath

from ansible_collections.gb10.serving.plugins.module_utils._weights.disk import GIB, disk_shortfall

__all__ = ["GIB", "mount_for", "weights_disk_problems"]


def mount_for(path, mounts):
    """The mount (an entry of Ansible's ``mounts`` facts) whose mount point is ``path`` or its nearest parent."""
    path = posixpath.normpath(path)
    best = None
    for mount in mounts:
        point = posixpath.normpath(mount.get("mount", ""))
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) > len(posixpath.normpath(best["mount"]))):
            best = mount
    return best


def weights_disk_problems(node, cache_dir, mounts, total_bytes, present_bytes, reserve_gib):
    """Refuse a fetch that would fill the disk: what is still missing plus the reserve must fit in the free space."""
    mount = mount_for(cache_dir, mounts)
    missing = max(int(total_bytes) - int(present_bytes), 0)
    if mount is None:
        return [f"{node}: no mount holds {cache_dir} in the node's facts, so its free space is unknown"]
    problem = disk_shortfall(
        f"{node}: {cache_dir} (on {mount['mount']})", int(mount.get("size_available", 0)), missing, reserve_gib
    )
    return [problem] if problem else []
