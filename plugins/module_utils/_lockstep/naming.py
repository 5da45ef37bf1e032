# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Package and release names: Ubuntu's linux-restricted-modules-nvidia and linux-meta-nvidia conventions."""

from __future__ import annotations

import re

# A kernel release: <upstream>-<abi number>-<flavour>, e.g. 6.17.0-1014-nvidia or 6.17.0-1014-nvidia-64k.
RELEASE_RE = re.compile(r"^(?P<abi>[0-9]+\.[0-9]+\.[0-9]+-[0-9]+)-(?P<flavour>[a-z0-9][a-z0-9.+-]*)$")


def split_release(release):
    """``6.17.0-1014-nvidia`` -> ``("6.17.0-1014", "nvidia")``; ``(None, None)`` when it is not a release."""
    match = RELEASE_RE.match(release or "")
    if not match:
        return None, None
    return match.group("abi"), match.group("flavour")


def modules_package_name(branch, variant, release):
    """The ABI-specific modules package, e.g. ``linux-modules-nvidia-580-open-6.17.0-1014-nvidia``."""
    infix = "-" + variant if variant else ""
    return f"linux-modules-nvidia-{branch}{infix}-{release}"


def modules_metapackage_name(branch, variant, meta_flavour):
    """The modules metapackage, e.g. ``linux-modules-nvidia-580-open-nvidia-hwe-24.04``."""
    infix = "-" + variant if variant else ""
    return f"linux-modules-nvidia-{branch}{infix}-{meta_flavour}"


def image_metapackage_name(meta_flavour):
    """The kernel image metapackage, e.g. ``linux-image-nvidia-hwe-24.04``."""
    return f"linux-image-{meta_flavour}"
