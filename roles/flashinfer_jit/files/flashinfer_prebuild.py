#!/usr/bin/env python
"""Build the CUTLASS fused-MoE JIT module that vLLM will ask FlashInfer for, into FLASHINFER_WORKSPACE_BASE.

Runs inside a throwaway container of the serving image (roles/flashinfer_jit) or bare on a machine with torch, nvcc
and ninja (device/flashinfer/). It makes the same call vLLM's flashinfer_cutlass MoE path makes:
``flashinfer.fused_moe.core.get_cutlass_fused_moe_module(str(major * 10 + minor))`` with use_fast_build False, so
the build.ninja, the objects and the .so are the ones the serving process would build at KV-cache profiling, and
a later build_and_load() there finds ninja with nothing to do.

Output: ninja's own lines (tee'd to <build_dir>/gb10-prebuild.log), then one line
``GB10_PREBUILD_RESULT {json}``; on success a stamp <build_dir>/gb10-prebuild.json records (image digest,
flashinfer version, arch, module, .so sha256, the sha256 of the build.ninja it wrote, .ninja_log's line count and
sha256, the slowest unit, MAX_JOBS, seconds). Exit 0 built or already there, 2 refused, 3 build failed.

``--ninja-only`` builds nothing and writes nothing: it prints ``GB10_PREBUILD_NINJA {json}`` with the build.ninja
this process's environment would write (flashinfer.jit.cpp_ext.generate_ninja_build_for_op over the JitSpec's own
fields, what JitSpecNvcc.write_ninja writes), its sha256, and the prebuilt modules this process would load instead
(``aot``). The role runs it in a throwaway container with the serving unit's environment files and mounts (issue 17:
the build's own identity is the cache key).

Prebuilt modules (issue 38 item 4): flashinfer 0.7 loads a module from an installed JIT-cache provider (the
``flashinfer_jit_cache`` shim and its per-architecture providers, e.g. sm121a) without any build when one covers
the target architecture (0.7.2.post1 jit/env.py ``get_aot_artifacts``, jit/core.py ``JitSpecNvcc.try_load``); 0.6
only from flashinfer's own data/aot folder. When the serving call would load such an artifact, the prebuild builds
nothing and stamps it ``prebuilt`` with the artifacts' paths and sha256.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time

STAMP_NAME = "gb10-prebuild.json"
LOG_NAME = "gb10-prebuild.log"


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _result(**fields):
    print("GB10_PREBUILD_RESULT " + json.dumps(fields, sort_keys=True), flush=True)


def _import_spec(backend):
    """The JitSpec vLLM's call builds, and flashinfer's cache folders (imported from the installed flashinfer)."""
    from flashinfer.jit import env as jit_env
    from flashinfer.jit import fused_moe as jit_fused_moe

    generators = {
        "120": "gen_cutlass_fused_moe_sm120_module",
        "121": "gen_cutlass_fused_moe_sm120_module",
        "103": "gen_cutlass_fused_moe_sm103_module",
        "100": "gen_cutlass_fused_moe_sm100_module",
        "107": "gen_cutlass_fused_moe_sm100_module",
        "110": "gen_cutlass_fused_moe_sm100_module",
        "90": "gen_cutlass_fused_moe_sm90_module",
        "89": "gen_cutlass_fused_moe_sm89_module",
    }
    spec = getattr(jit_fused_moe, generators[backend])(use_fast_build=False)
    return spec, jit_env


def _ninja_text(spec):
    """The build.ninja JitSpecNvcc.write_ninja (flashinfer 0.6.18 jit/core.py) would write here, unwritten."""
    from flashinfer.jit.cpp_ext import generate_ninja_build_for_op

    return generate_ninja_build_for_op(
        name=spec.name,
        sources=spec.sources,
        extra_cflags=spec.extra_cflags,
        extra_cuda_cflags=spec.extra_cuda_cflags,
        extra_ldflags=spec.extra_ldflags,
        extra_include_dirs=spec.extra_include_dirs,
        needs_device_linking=spec.needs_device_linking,
    )


def _aot(spec):
    """The prebuilt modules flashinfer would load for this spec without a build: [{provider, path, sha256, targets}].

    0.7+: JitSpecNvcc.aot_artifacts (providers whose architectures cover the target, chosen as try_load chooses);
    0.6: JitSpec.is_aot over the one aot_path in flashinfer's package.
    """
    artifacts = getattr(spec, "aot_artifacts", None)
    if artifacts is None:
        found = [("flashinfer-python", spec.aot_path, None)] if getattr(spec, "is_aot", False) else []
    else:
        found = [(item.provider_id, item.path, item.cuda_architectures) for item in artifacts]
    return [
        {"provider": provider, "path": str(path), "sha256": _sha256(str(path)), "targets": sorted(targets or [])}
        for provider, path, targets in found
    ]


def _write_stamp(path, stamp):
    """Written aside and renamed: a reader never sees half a stamp."""
    with open(path + ".tmp", "w") as handle:
        json.dump(stamp, handle, sort_keys=True, indent=1)
    os.replace(path + ".tmp", path)


def _text_sha256(text):
    return hashlib.sha256(text.encode()).hexdigest()


def _ninja_log_summary(build_dir):
    """.ninja_log's line count and sha256 (a later rebuild appends to it) and its slowest unit (the stall yardstick)."""
    path = os.path.join(build_dir, ".ninja_log")
    try:
        with open(path) as handle:
            text = handle.read()
    except OSError:
        text = ""
    entries = []
    for line in text.splitlines():
        fields = line.split("\t")
        if not line.startswith("#") and len(fields) >= 4 and fields[0].isdigit() and fields[1].isdigit():
            entries.append((int(fields[1]) - int(fields[0]), fields[3]))
    worst = max(entries, default=(0, ""))
    return {
        "ninja_log_lines": len(text.splitlines()),
        "ninja_log_sha256": _text_sha256(text),
        "worst_unit_seconds": round(worst[0] / 1000.0, 1),
        "worst_unit": worst[1].rsplit("/", 1)[-1],
        "steps": len(entries),
    }


def _arch_from_args(args):
    if args.compute_capability:
        major, minor = (int(x) for x in args.compute_capability.split("."))
        # Same arch folder as the serving process computes from the GPU (CompilationContext).
        os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", f"{major}.{minor}")


def ninja_only(args):
    """Print the build.ninja this environment would write, and its sha256; write nothing (the cache is shared)."""
    _arch_from_args(args)
    major, minor = _capability(args)
    spec, _jit_env = _import_spec(f"{major * 10 + minor}")
    text = _ninja_text(spec)
    found = {"module": spec.name, "path": str(spec.ninja_path), "sha256": _text_sha256(text), "text": text}
    print("GB10_PREBUILD_NINJA " + json.dumps(found | {"aot": _aot(spec)}), flush=True)
    return 0


def _capability(args):
    if args.compute_capability:
        major, minor = (int(x) for x in args.compute_capability.split("."))
        return major, minor
    import torch

    return torch.cuda.get_device_capability(0)


def child(args):
    """Build in this process (stdout is the parent's pipe): get_cutlass_fused_moe_module, as vLLM calls it."""
    major, minor = _capability(args)
    backend = f"{major * 10 + minor}"
    try:
        from flashinfer.fused_moe.core import get_cutlass_fused_moe_module
    except Exception as exc:
        # The serving image imports the whole package; a bare machine may lack optional dependencies of
        # flashinfer/__init__: build the very same JitSpec through flashinfer.jit instead.
        print(f"gb10-prebuild: flashinfer.fused_moe unavailable ({exc}); building the same JitSpec", flush=True)
        spec, _jit_env = _import_spec(backend)
        spec.build_and_load()
        return 0
    get_cutlass_fused_moe_module(backend)
    return 0


def parent(args):
    env = os.environ
    refusals = []
    debug = env.get("FLASHINFER_JIT_DEBUG")
    if (debug if debug is not None else env.get("FLASHINFER_JIT_VERBOSE", "0")) == "1":
        refusals.append("debug build: FLASHINFER_JIT_DEBUG (or FLASHINFER_JIT_VERBOSE without it) is 1")
    max_jobs = env.get("MAX_JOBS", "")
    if not max_jobs.isdigit() or int(max_jobs) == 0:
        refusals.append(f"MAX_JOBS={max_jobs!r}: a positive integer is required (flashinfer ignores anything else)")
    _arch_from_args(args)
    major, minor = _capability(args)
    backend = f"{major * 10 + minor}"
    spec, jit_env = _import_spec(backend)
    import flashinfer.jit.env as env_module

    version = env_module.flashinfer_version
    build_dir = str(spec.build_dir)
    library = str(spec.jit_library_path)
    flags = list(spec.extra_cuda_cflags or [])
    if "--device-debug" in flags or "-O0" in flags:
        refusals.append(f"flashinfer generated a debug JitSpec (cuda flags include {flags[-6:]})")
    common = {
        "module": spec.name,
        "build_dir": build_dir,
        "library": library,
        "flashinfer_version": version,
        "workspace": str(jit_env.FLASHINFER_WORKSPACE_DIR),
        "backend": backend,
        "max_jobs": max_jobs,
        "sources": len(spec.sources),
    }
    if refusals:
        _result(status="refused", refusals=refusals, **common)
        return 2
    os.makedirs(build_dir, exist_ok=True)
    stamp_path = os.path.join(build_dir, STAMP_NAME)
    aot = _aot(spec)
    if aot:
        return _prebuilt(args, spec, jit_env, version, aot, stamp_path, common, major, minor)
    ninja_path = str(spec.ninja_path)
    if os.path.exists(library) and os.path.exists(stamp_path) and os.path.exists(ninja_path):
        with open(stamp_path) as handle:
            found = json.load(handle)
        # Present only for this very build.ninja: another CC, CXX, CUDA_HOME or FLASHINFER_* variable in this
        # environment writes another one, and ninja would rebuild (issue 17).
        wanted_ninja = _text_sha256(_ninja_text(spec))
        if (
            found.get("image_digest") == args.image_digest
            and found.get("library_sha256") == _sha256(library)
            and found.get("ninja_sha256") == wanted_ninja == _sha256(ninja_path)
        ):
            _result(status="present", stamp=found, **common)
            return 0
    child_env = dict(env)
    # Ninja's lines on stdout, release flags kept: FLASHINFER_JIT_DEBUG=0 pins the release build.
    child_env.update({"FLASHINFER_JIT_VERBOSE": "1", "FLASHINFER_JIT_DEBUG": "0", "PYTHONUNBUFFERED": "1"})
    argv = [sys.executable, os.path.abspath(__file__), "--child"]
    if args.compute_capability:
        argv += ["--compute-capability", args.compute_capability]
    started = time.time()
    log_path = os.path.join(build_dir, LOG_NAME)
    with open(log_path, "w") as log:
        proc = subprocess.Popen(argv, env=child_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in proc.stdout:
            sys.stdout.write(line)
            log.write(line)
            log.flush()
        rc = proc.wait()
    seconds = round(time.time() - started, 1)
    if rc != 0 or not os.path.exists(library):
        _result(status="failed", rc=rc, seconds=seconds, log=log_path, **common)
        return 3
    stamp = {
        "image_digest": args.image_digest,
        "flashinfer_version": version,
        "arch": os.path.basename(str(jit_env.FLASHINFER_WORKSPACE_DIR)),
        "compute_capability": f"{major}.{minor}",
        "module": spec.name,
        "library_sha256": _sha256(library),
        "ninja_sha256": _sha256(ninja_path),
        "max_jobs": int(max_jobs),
        "build_seconds": seconds,
        **_ninja_log_summary(build_dir),
    }
    _write_stamp(stamp_path, stamp)
    _result(status="built", seconds=seconds, stamp=stamp, log=log_path, **common)
    return 0


def _prebuilt(args, spec, jit_env, version, aot, stamp_path, common, major, minor):
    """The serving call loads a prebuilt module: build nothing, stamp what it loads (its paths and sha256)."""
    stamp = {
        "kind": "prebuilt",
        "image_digest": args.image_digest,
        "flashinfer_version": version,
        "arch": os.path.basename(str(jit_env.FLASHINFER_WORKSPACE_DIR)),
        "compute_capability": f"{major}.{minor}",
        "module": spec.name,
        "aot": aot,
        "library_sha256": aot[0]["sha256"],
        "ninja_sha256": _text_sha256(_ninja_text(spec)),
        "build_seconds": 0,
    }
    # The role reads the build's log afterwards (flashinfer_jit_outcome): it says what was loaded instead.
    with open(os.path.join(os.path.dirname(stamp_path), LOG_NAME), "w") as log:
        paths = ", ".join(item["path"] for item in aot)
        log.write(f"gb10-prebuild: {spec.name} is prebuilt ({paths}): nothing built\n")
    _write_stamp(stamp_path, stamp)
    _result(status="prebuilt", seconds=0, stamp=stamp, **common)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image-digest", default=os.environ.get("GB10_IMAGE_DIGEST", "unknown"))
    parser.add_argument("--compute-capability", default=os.environ.get("GB10_COMPUTE_CAPABILITY", ""))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--ninja-only", action="store_true", help="print the build.ninja this environment writes")
    args = parser.parse_args()
    if args.ninja_only:
        return ninja_only(args)
    if args.child:
        return child(args)
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
