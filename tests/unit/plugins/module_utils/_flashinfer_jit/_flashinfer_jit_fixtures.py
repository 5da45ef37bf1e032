# Copyright: gb10.serving maintainers
# Apache-2.0
"""What the _flashinfer_jit tests share: the captured build logs and the stamp of a module prebuilt in the image."""

from __future__ import annotations

from pathlib import Path

FIXTURES = Path(__file__).parents[3] / "fixtures" / "flashinfer_jit"


def lines(name):
    return (FIXTURES / name).read_text().splitlines()


# Issue 38 item 4: a module prebuilt in the image (flashinfer 0.7 JIT-cache providers).
PREBUILT = {
    "kind": "prebuilt",
    "image_digest": "sha256:" + "7" * 64,
    "flashinfer_version": "0.7.2.post1",
    "arch": "121a",
    "module": "fused_moe_120",
    "aot": [{"provider": "cu130-sm121a", "path": "/opt/jit_cache/fused_moe_120/fused_moe_120.so", "sha256": "ab"}],
}
