"""Write a tiny stand-in wheel: `fake_wheel.py DEST NAME VERSION [PATH=CONTENT ...]`.

The simulation's pin mover is one: flashinfer-python 0.6.17 (seed 004: 0.6.17 gave NaN at batch 64-256), so a test
can build a layer that drags the base's 0.6.18 pin down and see the gate refuse it. Tests also use it to give a
stand-in base the CUDA pip-wheel layout of a real image (nvidia/cu13/include/nvrtc.h, nvidia/cu13/lib/libnvrtc.so.13).
"""

import base64
import hashlib
import re
import sys
import zipfile
from pathlib import Path


def _record_line(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(dest, name, version, files, tag="py3-none-any", requires=(), entry_points=""):
    """Write <name>-<version>-<tag>.whl holding ``files`` ({path: bytes}) into ``dest``; return its path.

    ``requires`` become METADATA's Requires-Dist lines, ``entry_points`` the dist-info's entry_points.txt (the
    FlashInfer stand-in's JIT-cache wheels, sim/flashinfer_standin/jit_cache/make_wheels.py, need both).
    """
    stem = re.sub(r"[-_.]+", "_", name).lower()
    info = f"{stem}-{version}.dist-info"
    files = dict(files)
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    metadata += "".join(f"Requires-Dist: {requirement}\n" for requirement in requires)
    files[f"{info}/METADATA"] = metadata.encode()
    purelib = "true" if tag == "py3-none-any" else "false"
    files[f"{info}/WHEEL"] = (
        f"Wheel-Version: 1.0\nGenerator: gb10-sim\nRoot-Is-Purelib: {purelib}\nTag: {tag}\n".encode()
    )
    if entry_points:
        files[f"{info}/entry_points.txt"] = entry_points.encode()
    record = [_record_line(path, data) for path, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = Path(dest) / f"{stem}-{version}-{tag}.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0)), data)
    return wheel


def main(argv):
    dest, name, version, *pairs = argv
    files = {pair.partition("=")[0]: pair.partition("=")[2].encode() for pair in pairs}
    print(build_wheel(dest, name, version, files))


if __name__ == "__main__":
    main(sys.argv[1:])
