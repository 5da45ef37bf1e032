"""gb10.serving.flashinfer_jit_rebuilt over a cache folder (issue 17 item 2)."""

import hashlib
import json

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit import stamps
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.build_identity import ninja_log_summary
from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.cache_layout import STAMP_NAME
from ansible_collections.gb10.serving.plugins.modules import flashinfer_jit_rebuilt

IMAGE = "registry:5000/vllm@sha256:" + "e" * 64
LOG = "# ninja log v5\n0\t1000\t1\t/c/a.cuda.o\tx\n1000\t2000\t1\t/c/fused_moe_120.so\ty\n"


def prebuilt(cache_dir, image=IMAGE):
    build_dir = cache_dir / ".cache/flashinfer/0.6.18/121a/cached_ops/fused_moe_120"
    build_dir.mkdir(parents=True)
    (build_dir / "fused_moe_120.so").write_bytes(b"\x7fELF")
    (build_dir / ".ninja_log").write_text(LOG)
    sha = hashlib.sha256(b"\x7fELF").hexdigest()
    stamp = stamps.stamp(image, "0.6.18", "12.1", sha, 2, 2.0, **ninja_log_summary(LOG))
    (build_dir / STAMP_NAME).write_text(json.dumps(stamp))
    return build_dir


def params(cache_dir):
    return {"node": "gb10-1", "cache_dir": str(cache_dir), "image": IMAGE, "fail": True}


def test_zero_rebuilt_after_a_load_with_nothing_to_do(tmp_path):
    prebuilt(tmp_path)
    result = flashinfer_jit_rebuilt.run(params(tmp_path))
    assert (result["rebuilt"], len(result["modules"])) == (0, 1)
    assert result["message"] == "gb10-1: 0 rebuilt modules (1 prebuilt module(s) checked)"


def test_pitfall_serving_start_that_rebuilt_the_module_is_named(tmp_path):
    build_dir = prebuilt(tmp_path)
    with open(build_dir / ".ninja_log", "a") as handle:
        handle.write("5000\t9000\t2\t/c/a.cuda.o\tq\n")
    (build_dir / "fused_moe_120.so").write_bytes(b"\x7fELF rebuilt")
    result = flashinfer_jit_rebuilt.run(params(tmp_path))
    assert result["rebuilt"] == 1
    assert result["message"].startswith(
        "gb10-1: the serving start rebuilt 1 prebuilt FlashInfer module(s): fused_moe_120"
    )
    assert "1 unit(s) rebuilt (a.cuda.o)" in result["message"]


def test_modules_of_another_image_are_not_this_units(tmp_path):
    prebuilt(tmp_path, image="registry:5000/vllm@sha256:" + "f" * 64)
    assert flashinfer_jit_rebuilt.run(params(tmp_path))["modules"] == []
