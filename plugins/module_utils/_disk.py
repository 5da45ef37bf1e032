"""Free disk for the model weights: which mount holds the cache, and whether what is missing fits there."""

from __future__ import annotations

import posixpath

GIB = 1024**3


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
    free = int(mount.get("size_available", 0))
    need = missing + int(float(reserve_gib) * GIB)
    if missing == 0 or free >= need:
        return []
    return [
        f"{node}: {cache_dir} (on {mount['mount']}) has {free / GIB:.1f} GiB free, the weights still need "
        f"{missing / GIB:.1f} GiB plus the {float(reserve_gib):g} GiB reserve = {need / GIB:.1f} GiB. Fix: free "
        f"{(need - free) / GIB:.1f} GiB there, move the cache (gb10_hf_cache_dir) to a larger disk, or lower "
        "model_weights_disk_reserve_gib"
    ]
