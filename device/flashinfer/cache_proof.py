#!/usr/bin/env python
"""Prove the FlashInfer JIT cache end to end on a small module: build once, then load from the cache in a fresh process.

Usage: cache_proof.py build|load   (FLASHINFER_WORKSPACE_BASE chooses the cache). Prints one JSON line.
"""

import json
import sys
import time

t0 = time.time()
from flashinfer.jit.activation import gen_act_and_mul_module

t_import = time.time() - t0
spec = gen_act_and_mul_module("silu")
so = spec.jit_library_path
log = spec.build_dir / ".ninja_log"
before = (so.stat().st_mtime if so.exists() else None, log.read_text().count("\n") if log.exists() else 0)
t1 = time.time()
module = spec.build_and_load()
t_build_and_load = time.time() - t1
after = (so.stat().st_mtime, log.read_text().count("\n"))
ran = None
try:
    import torch

    x = torch.randn(64, 256, dtype=torch.float16, device="cuda")
    out = torch.empty(64, 128, dtype=torch.float16, device="cuda")
    module.silu_and_mul(out, x, False)
    ref = torch.nn.functional.silu(x[:, :128]) * x[:, 128:]
    ran = float((out - ref).abs().max())
except Exception as exc:  # report, do not hide
    ran = f"call failed: {exc}"
print(
    json.dumps(
        {
            "phase": sys.argv[1],
            "module": spec.name,
            "library": str(so),
            "import_s": round(t_import, 2),
            "build_and_load_s": round(t_build_and_load, 2),
            "total_s": round(time.time() - t0, 2),
            "so_mtime_unchanged": before[0] == after[0],
            "ninja_log_lines_before_after": [before[1], after[1]],
            "silu_and_mul_max_abs_err": ran,
        }
    )
)
