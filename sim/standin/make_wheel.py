#!/usr/bin/env python
"""Write the stand-in's two wheels (vllm 0.32.0 and flashinfer-python 0.6.18), byte-for-byte reproducible.

No build backend is needed (so nothing is fetched for it): a wheel is a zip of the package files plus a
dist-info folder (METADATA, WHEEL, entry_points.txt, RECORD). Timestamps are fixed, so the same sources give the
same wheel bytes and the image build cache holds.

    make_wheel.py OUT_DIR CATALOG_JSON
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(HERE, "src")
EPOCH = (1980, 1, 1, 0, 0, 0)

DISTS = (
    {
        "name": "vllm",
        "version": "0.32.0",
        "package": "vllm",
        "summary": "gb10.serving simulation: a strict stand-in of vLLM 0.32.0's `vllm serve` (no GPU engine)",
        "requires": ("flashinfer-python==0.6.18", "huggingface-hub==2.4.0", "prometheus-client==0.26.0"),
        "scripts": {"vllm": "vllm._standin.cli:entry"},
        "catalog": True,
    },
    {
        "name": "flashinfer-python",
        "version": "0.6.18",
        "package": "flashinfer",
        "summary": "gb10.serving simulation: the pinned FlashInfer distribution (JIT path: real gcc work via ninja)",
        # The JIT stand-in of sim/flashinfer_standin: the prebuild and the engine compile through it.
        "src": os.path.join(HERE, "..", "flashinfer_standin"),
        "requires": ("ninja==1.13.2",),
        "scripts": {},
        "catalog": False,
    },
)


def _digest(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _files(dist, catalog):
    src = os.path.abspath(dist.get("src", SRC))
    root = os.path.join(src, dist["package"])
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                with open(path, "rb") as handle:
                    yield os.path.relpath(path, src).replace(os.sep, "/"), handle.read()
    if dist["catalog"]:
        with open(catalog, "rb") as handle:
            yield f"vllm/_standin/catalog/{os.path.basename(catalog)}", handle.read()


def build(dist, out_dir, catalog):
    stem = f"{dist['name'].replace('-', '_')}-{dist['version']}"
    info = f"{stem}.dist-info"
    entries = list(_files(dist, catalog))
    metadata = [
        "Metadata-Version: 2.1",
        f"Name: {dist['name']}",
        f"Version: {dist['version']}",
        f"Summary: {dist['summary']}",
        "Requires-Python: >=3.10",
    ]
    metadata += [f"Requires-Dist: {req}" for req in dist["requires"]]
    entries.append((f"{info}/METADATA", ("\n".join(metadata) + "\n").encode()))
    wheel = "Wheel-Version: 1.0\nGenerator: gb10-standin\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    entries.append((f"{info}/WHEEL", wheel.encode()))
    if dist["scripts"]:
        lines = ["[console_scripts]"] + [f"{k} = {v}" for k, v in sorted(dist["scripts"].items())]
        entries.append((f"{info}/entry_points.txt", ("\n".join(lines) + "\n").encode()))
    record = "".join(f"{path},{_digest(data)},{len(data)}\n" for path, data in entries) + f"{info}/RECORD,,\n"
    entries.append((f"{info}/RECORD", record.encode()))
    target = os.path.join(out_dir, f"{stem}-py3-none-any.whl")
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in entries:
            item = zipfile.ZipInfo(path, EPOCH)
            item.external_attr = 0o644 << 16
            item.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(item, data)
    return target


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir, catalog = argv
    os.makedirs(out_dir, exist_ok=True)
    for dist in DISTS:
        print(build(dist, out_dir, catalog))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
