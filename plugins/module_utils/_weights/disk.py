# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Does the rest of the weights fit on the cache's disk, with the reserve?"""

from __future__ import annotations

GIB = 1024**3


def disk_shortfall(where, free, missing, reserve_gib):
    """None when ``missing`` bytes plus ``reserve_gib`` fit in ``free`` bytes (or nothing is missing); else why not,
    with the numbers and the fix. ``where`` names the cache and its disk, e.g. ``spark-2: /srv/hf (on /)``."""
    free, missing = int(free), max(int(missing), 0)
    need = missing + int(float(reserve_gib) * GIB)
    if missing == 0 or free >= need:
        return None
    return (
        f"{where} has {free / GIB:.1f} GiB free, the weights still need {missing / GIB:.1f} GiB plus the "
        f"{float(reserve_gib):g} GiB reserve = {need / GIB:.1f} GiB. Fix: free {(need - free) / GIB:.1f} GiB there, "
        "move the cache (gb10_hf_cache_dir) to a larger disk, or lower model_weights_disk_reserve_gib"
    )
