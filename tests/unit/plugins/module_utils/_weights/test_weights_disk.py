# Copyright: gb10.serving maintainers
# Apache-2.0
"""Does the rest of the weights fit on the cache's disk (plugins/module_utils/_weights/disk.py)?"""

from __future__ import annotations

from ansible_collections.gb10.serving.plugins.module_utils._weights.disk import GIB, disk_shortfall


def test_disk_shortfall_counts_only_what_is_missing():
    assert disk_shortfall("n: /c (on /)", 50 * GIB, 0, 10) is None
    assert disk_shortfall("n: /c (on /)", 50 * GIB, 40 * GIB, 10) is None
    msg = disk_shortfall("n: /c (on /)", 50 * GIB, 45 * GIB, 10)
    assert msg.startswith("n: /c (on /) has 50.0 GiB free, the weights still need 45.0 GiB plus the 10 GiB reserve")
    assert "free 5.0 GiB there" in msg
