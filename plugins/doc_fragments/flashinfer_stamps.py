# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The options of the modules that judge the prebuild stamps of one image in a node's FlashInfer cache.

Their argument spec is _flashinfer_jit/stamps.py STAMPS_ARGUMENT_SPEC; the two change together.
"""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  cache_dir:
    description: The node's FlashInfer cache (host folder); every prebuild stamp in it for O(image) is checked.
    type: path
    required: true
  image:
    description: The image the serving unit runs (repository@sha256:...); stamps of other images are not its cache.
    type: str
    required: true
"""
