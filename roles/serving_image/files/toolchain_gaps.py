"""Close the CUDA toolchain gaps of a pip-wheel CUDA inside an image, only where each gap exists, then check.

Seed 004, the CUTLASS saga: layer 1, FlashInfer's JIT includes <nvrtc.h>, which the image ships only inside the
CUDA pip wheel (site-packages/nvidia/cu13/include) and not in the CUDA include folder; layer 3, the final link
needs `-lnvrtc` while the wheel ships only the SONAME libnvrtc.so.13. Fix both halves at once.

    python3 toolchain_gaps.py --cuda-include /usr/local/cuda/include --lib nvrtc [--apply]

Prints one JSON report; exits 1 when a gap remains after --apply.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import site
import sys

_SONAME_RE = re.compile(r"^lib(?P<name>[A-Za-z0-9_+-]+)\.so\.(?P<major>\d+)$")


def wheel_roots(site_dirs):
    """Every nvidia/<component> folder of the CUDA pip wheels in these site-packages folders."""
    roots = []
    for base in site_dirs:
        top = os.path.join(base, "nvidia")
        if os.path.isdir(top):
            roots += [os.path.join(top, entry) for entry in sorted(os.listdir(top))]
    return [root for root in roots if os.path.isdir(root)]


def header_links(wheel_headers, cuda_include, present):
    """[(link, target)]: each wheel header (relative path -> absolute path) the CUDA include folder lacks.

    Nothing is linked where the CUDA include folder does not exist (no toolkit to complete); the first wheel to
    carry a header wins.
    """
    if cuda_include is None:
        return []
    links, seen = [], set()
    for rel, target in wheel_headers:
        if rel in seen or rel in present:
            continue
        seen.add(rel)
        links.append((os.path.join(cuda_include, rel), target))
    return links


def soname_links(lib_files, wanted):
    """[(link, target)]: lib<name>.so -> lib<name>.so.<major> in the same folder, where only the SONAME exists."""
    by_dir = {}
    for path in lib_files:
        by_dir.setdefault(os.path.dirname(path), set()).add(os.path.basename(path))
    links = []
    for folder, names in sorted(by_dir.items()):
        for name in sorted(names):
            match = _SONAME_RE.match(name)
            if match and match.group("name") in wanted and f"lib{match.group('name')}.so" not in names:
                links.append((os.path.join(folder, f"lib{match.group('name')}.so"), os.path.join(folder, name)))
    return links


def _walk_headers(roots):
    for root in roots:
        include = os.path.join(root, "include")
        for folder, _dirs, files in os.walk(include):
            for name in sorted(files):
                if name.endswith((".h", ".hpp", ".cuh")):
                    path = os.path.join(folder, name)
                    yield os.path.relpath(path, include), path


def _present_headers(cuda_include):
    found = set()
    for folder, _dirs, files in os.walk(cuda_include):
        found.update(os.path.relpath(os.path.join(folder, name), cuda_include) for name in files)
    return found


def _lib_files(roots):
    return [
        os.path.join(root, "lib", name)
        for root in roots
        if os.path.isdir(os.path.join(root, "lib"))
        for name in sorted(os.listdir(os.path.join(root, "lib")))
    ]


def find(cuda_include, wanted, site_dirs):
    roots = wheel_roots(site_dirs)
    include = cuda_include if os.path.isdir(cuda_include) else None
    present = _present_headers(include) if include else set()
    return {
        "wheel_roots": roots,
        "cuda_include": include,
        "headers": header_links(list(_walk_headers(roots)), include, present),
        "libraries": soname_links(_lib_files(roots), set(wanted)),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuda-include", default="/usr/local/cuda/include")
    parser.add_argument("--lib", action="append", default=[])
    parser.add_argument("--apply", action="store_true")
    args = parser.parse_args(argv)
    site_dirs = site.getsitepackages()
    gaps = find(args.cuda_include, args.lib, site_dirs)
    report = {"found": gaps, "applied": [], "remaining": []}
    if args.apply:
        for link, target in gaps["headers"] + gaps["libraries"]:
            os.makedirs(os.path.dirname(link), exist_ok=True)
            os.symlink(target, link)
            report["applied"].append([link, target])
        after = find(args.cuda_include, args.lib, site_dirs)
        report["remaining"] = after["headers"] + after["libraries"]
        report["remaining"] += [link for link, _target in report["applied"] if not os.path.exists(link)]
    print(json.dumps(report, sort_keys=True))
    return 1 if report["remaining"] else 0


if __name__ == "__main__":
    sys.exit(main())
