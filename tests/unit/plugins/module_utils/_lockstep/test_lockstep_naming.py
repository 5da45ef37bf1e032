# Copyright: gb10.serving maintainers
# Apache-2.0
"""Package and release names (_lockstep/naming.py)."""

from __future__ import annotations

from ansible_collections.gb10.serving.plugins.module_utils._lockstep.naming import (
    modules_metapackage_name,
    modules_package_name,
    split_release,
)


def test_lockstep_package_names():
    assert modules_package_name("580", "open", "6.17.0-1018-nvidia") == (
        "linux-modules-nvidia-580-open-6.17.0-1018-nvidia"
    )
    assert modules_metapackage_name("580", "open", "nvidia-hwe-24.04") == (
        "linux-modules-nvidia-580-open-nvidia-hwe-24.04"
    )
    assert modules_package_name("580", "", "6.17.0-1014-nvidia") == "linux-modules-nvidia-580-6.17.0-1014-nvidia"
    assert split_release("6.17.0-1014-nvidia-64k") == ("6.17.0-1014", "nvidia-64k")
    assert split_release("nvidia-hwe-24.04") == (None, None)
