# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The one error of the package: an input that cannot describe a real node or build."""

from __future__ import annotations


class FlashinferJitError(ValueError):
    """An input that cannot describe a real node or build."""
