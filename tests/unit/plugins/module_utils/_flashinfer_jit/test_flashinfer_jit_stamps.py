# Copyright: gb10.serving maintainers
# Apache-2.0
"""Cache presence, idempotence (plugins/module_utils/_flashinfer_jit/stamps.py), built and prebuilt stamps."""

from __future__ import annotations

import pytest
from _flashinfer_jit_fixtures import PREBUILT

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit import stamps
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.stamps import cache_state

DIGEST = "registry:5000/vllm@sha256:" + "a" * 64

WANTED = {"image_digest": DIGEST, "flashinfer_version": "0.6.18", "compute_capability": "12.1"}


def good_stamp():
    return stamps.stamp(DIGEST, "0.6.18", "12.1", "f" * 64, 10, 1500.0)


def test_cache_present_when_stamp_matches():
    present, reason = cache_state(WANTED, good_stamp(), "f" * 64)
    assert present
    assert "fused_moe_120 for 121a" in reason


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        ({"image_digest": "registry:5000/vllm@sha256:" + "b" * 64}, "stamp image_digest"),
        ({"flashinfer_version": "0.6.17"}, "stamp flashinfer_version"),
        ({"arch": "90a"}, "stamp arch"),
    ],
)
def test_cache_stale_when_stamp_differs(change, expect):
    stamp = good_stamp() | change
    present, reason = cache_state(WANTED, stamp, "f" * 64)
    assert not present
    assert reason.startswith(expect)


def test_cache_missing_library_or_stamp_or_changed_library():
    assert cache_state(WANTED, good_stamp(), None) == (False, "the module library is not in the cache")
    assert not cache_state(WANTED, None, "f" * 64)[0]
    present, reason = cache_state(WANTED, good_stamp(), "e" * 64)
    assert not present
    assert "changed" in reason


WANTED_07 = {"image_digest": "sha256:" + "7" * 64, "flashinfer_version": "0.7.2.post1", "compute_capability": "12.1"}


def test_a_prebuilt_stamp_is_present_without_a_library_in_the_cache():
    present, reason = cache_state(WANTED_07, PREBUILT, None)
    assert present and "prebuilt in the image (/opt/jit_cache/fused_moe_120/fused_moe_120.so)" in reason
    assert not cache_state(WANTED_07 | {"image_digest": "sha256:" + "8" * 64}, PREBUILT, None)[0]
    assert not cache_state(WANTED_07, PREBUILT | {"aot": []}, None)[0]
