"""Close the CUDA toolchain gaps of a pip-wheel CUDA where FlashInfer's JIT looks, only where each exists, then link.

Seed 004, the CUTLASS saga: layer 1, FlashInfer's JIT includes <nvrtc.h>, which the image ships only inside the
CUDA pip wheel (site-packages/nvidia/cu13/include) and not in the CUDA include folder; layer 3, the final link
needs `-lnvrtc` while the wheel ships only the SONAME libnvrtc.so.13. Both halves are closed where FlashInfer's own
command lines search, read from the installed flashinfer package (falling back to FLASHINFER_FLAGS for its version):
flashinfer 0.6.18 compiles with `-isystem $cuda_home/include` and links the fused-MoE module with
`-shared -L$cuda_home/lib64 -L$cuda_home/lib64/stubs -lcudart -lcuda -lnvrtc`. A libnvrtc.so beside the SONAME in
the wheel's folder is not on that line (measured on an H200: `/usr/bin/ld: cannot find -lnvrtc` after such a fix).

Then the check compiles a unit that includes <nvrtc.h> and calls nvrtcVersion() with that include line, and links it
with that link line, with FlashInfer's own driver ($CXX, else c++), so a gap is found in seconds at image build
instead of 20 minutes into the module build.

    python3 toolchain_gaps.py [--cuda-home DIR] --lib nvrtc [--apply]

Prints one JSON report; exits 1 when a gap remains after --apply or the link check fails.
"""

from __future__ import annotations

import argparse
import ast
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import site
import subprocess
import sys
import tempfile

_SONAME_RE = re.compile(r"^lib(?P<name>[A-Za-z0-9_+-]+)\.so\.(?P<major>\d+)$")

# FlashInfer's flags by version, for when the installed package's source cannot be read. Copied from the released
# flashinfer-python 0.6.18 wheel:
#   flashinfer/jit/cpp_ext.py get_system_includes(): system_includes = [..., "$cuda_home/include", ...]
#     (build_common_cflags() turns each into "-isystem <dir>"; dropped when cuda_home == "/usr")
#   flashinfer/jit/cpp_ext.py generate_ninja_build_for_op(): ldflags = ["-shared", "-L$cuda_home/lib64",
#     "-L$cuda_home/lib64/stubs", "-lcudart", "-lcuda"], then FLASHINFER_EXTRA_LDFLAGS, then the module's
#     extra_ldflags; "rule link: command = $cxx $in $ldflags -o $out" with cxx = $CXX or "c++"
#   flashinfer/jit/fused_moe.py gen_cutlass_fused_moe_module(): gen_jit_spec(..., extra_ldflags=["-lnvrtc"], ...)
_FLAGS_0_6 = {
    "includes": ["$cuda_home/include"],
    "ldflags": ["-shared", "-L$cuda_home/lib64", "-L$cuda_home/lib64/stubs", "-lcudart", "-lcuda"],
    "module_ldflags": ["-lnvrtc"],
}
# 0.6.17: the same three lists, read by flags_from_source() from flashinfer_python-0.6.17-py3-none-any.whl's
# jit/cpp_ext.py and jit/fused_moe.py (PyPI), so an image whose ray layer moved the pin to it still gets its gaps
# closed and reaches the image gate, which names the moved pin.
FLASHINFER_FLAGS = {"0.6.17": _FLAGS_0_6, "0.6.18": _FLAGS_0_6}
# The flashinfer-python the collection pins (roles/flashinfer_jit flashinfer_jit_version); used when none is installed.
PINNED_FLASHINFER = "0.6.18"

# What the check's unit calls for each library it can exercise (header, one call that needs the library).
_PROBES = {"nvrtc": ("nvrtc.h", "int major = 0, minor = 0; return nvrtcVersion(&major, &minor) == NVRTC_SUCCESS;")}


def wheel_roots(site_dirs):
    """Every nvidia/<component> folder of the CUDA pip wheels in these site-packages folders."""
    roots = []
    for base in site_dirs:
        top = os.path.join(base, "nvidia")
        if os.path.isdir(top):
            roots += [os.path.join(top, entry) for entry in sorted(os.listdir(top))]
    return [root for root in roots if os.path.isdir(root)]


def flashinfer_cuda_home(environ, which=shutil.which):
    """The CUDA home flashinfer 0.6.18 uses (cpp_ext.get_cuda_path): $CUDA_HOME, $CUDA_PATH, nvcc's grandparent."""
    for name in ("CUDA_HOME", "CUDA_PATH"):
        if environ.get(name) is not None:
            return environ[name]
    nvcc = which("nvcc")
    if nvcc:
        return os.path.dirname(os.path.dirname(nvcc))
    return "/usr/local/cuda"


def _string_list(node, partial=False):
    """The string constants of a list literal: all of its elements must be ones unless partial."""
    if not isinstance(node, ast.List):
        return None
    strings = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return strings if partial or len(strings) == len(node.elts) else None


def _function(tree, name):
    return next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _assigned_list(func, target, partial=False):
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == target for t in node.targets):
            found = _string_list(node.value, partial)
            if found is not None:
                return found
    return None


def _keyword_list(func, call_name, keyword):
    for node in ast.walk(func):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == call_name:
            for kw in node.keywords:
                if kw.arg == keyword and _string_list(kw.value) is not None:
                    return _string_list(kw.value)
    return None


def flags_from_source(cpp_ext_text, fused_moe_text):
    """FlashInfer's include and link flags as its source builds them, or None where the source has another shape.

    Reads (not imports: that needs torch and a GPU-less import may fail) get_system_includes() and
    generate_ninja_build_for_op() of jit/cpp_ext.py and gen_cutlass_fused_moe_module() of jit/fused_moe.py.
    """
    try:
        cpp_ext, fused_moe = ast.parse(cpp_ext_text), ast.parse(fused_moe_text)
    except SyntaxError:
        return None
    includes_fn = _function(cpp_ext, "get_system_includes")
    ninja_fn = _function(cpp_ext, "generate_ninja_build_for_op")
    moe_fn = _function(fused_moe, "gen_cutlass_fused_moe_module")
    if not (includes_fn and ninja_fn and moe_fn):
        return None
    # The other system includes (Python, tvm_ffi, flashinfer's own, CUTLASS) are computed paths, not the toolkit's.
    includes = [d for d in (_assigned_list(includes_fn, "system_includes", True) or []) if "$cuda_home" in d]
    ldflags = _assigned_list(ninja_fn, "ldflags")
    module_ldflags = _keyword_list(moe_fn, "gen_jit_spec", "extra_ldflags")
    if not includes or not ldflags or module_ldflags is None:
        return None
    return {"includes": includes, "ldflags": ldflags, "module_ldflags": module_ldflags}


def flashinfer_flags(find_spec=importlib.util.find_spec, version_of=importlib.metadata.version):
    """(flags, source): from the installed flashinfer's own source, else FLASHINFER_FLAGS for its version.

    source names the files read or the table entry and why; flags is None when neither is known.
    """
    try:
        version = version_of("flashinfer-python")
    except importlib.metadata.PackageNotFoundError:
        version = None
    spec = find_spec("flashinfer") if version else None
    why = "flashinfer-python is not installed"
    if spec is not None and spec.submodule_search_locations:
        jit = os.path.join(next(iter(spec.submodule_search_locations)), "jit")
        paths = [os.path.join(jit, "cpp_ext.py"), os.path.join(jit, "fused_moe.py")]
        try:
            texts = []
            for path in paths:
                with open(path, encoding="utf-8") as handle:
                    texts.append(handle.read())
            flags = flags_from_source(*texts)
            why = f"{' and '.join(paths)} do not build the flags in the shape of 0.6.18"
        except OSError as exc:
            flags, why = None, f"{exc.filename}: {exc.strerror}"
        if flags is not None:
            return flags, f"flashinfer-python {version} source: {', '.join(paths)}"
    table_version = version or PINNED_FLASHINFER
    if table_version in FLASHINFER_FLAGS:
        return FLASHINFER_FLAGS[table_version], f"table FLASHINFER_FLAGS[{table_version!r}] ({why})"
    return None, f"flashinfer-python {version}: {why}, and FLASHINFER_FLAGS knows only {sorted(FLASHINFER_FLAGS)}"


def expand(flag, cuda_home):
    return flag.replace("$cuda_home", cuda_home)


def search_dirs(flags, cuda_home):
    """The -L folders of FlashInfer's link line, in order."""
    return [expand(f[2:], cuda_home) for f in flags["ldflags"] + flags["module_ldflags"] if f.startswith("-L")]


def link_libs(flags):
    """The -l names of FlashInfer's link line, in order."""
    return [f[2:] for f in flags["ldflags"] + flags["module_ldflags"] if f.startswith("-l")]


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


def soname_links(lib_files, wanted, dirs, present, cuda_major=None):
    """[(link, target)]: <first -L folder>/lib<name>.so -> a wheel's lib<name>.so.<major>, per wanted name ld misses.

    ld -l<name> takes lib<name>.so or lib<name>.a from the -L folders only; present holds the file names those
    folders have. Where wheels carry several majors, the toolkit's (cuda_major) wins, else the highest.
    """
    if not dirs:
        return []
    links = []
    for name in sorted(wanted):
        if {f"lib{name}.so", f"lib{name}.a"} & present:
            continue
        found = []
        for path in lib_files:
            match = _SONAME_RE.match(os.path.basename(path))
            if match and match.group("name") == name:
                found.append((int(match.group("major")) == cuda_major, int(match.group("major")), path))
        if found:
            links.append((os.path.join(dirs[0], f"lib{name}.so"), max(found)[2]))
    return links


def missing_libs(wanted, present, links):
    """Wanted names ld cannot find in the -L folders and no wheel can give."""
    linked = {os.path.basename(link) for link, _target in links}
    return [n for n in sorted(wanted) if not {f"lib{n}.so", f"lib{n}.a"} & present and f"lib{n}.so" not in linked]


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


def _present_libs(dirs):
    return {name for folder in dirs if os.path.isdir(folder) for name in os.listdir(folder)}


def _lib_files(roots):
    return [
        os.path.join(root, "lib", name)
        for root in roots
        if os.path.isdir(os.path.join(root, "lib"))
        for name in sorted(os.listdir(os.path.join(root, "lib")))
    ]


def _cuda_major(cuda_home):
    """The toolkit's major version from its version.json (CUDA 11.1 and later ship one), or None."""
    try:
        with open(os.path.join(cuda_home, "version.json"), encoding="utf-8") as handle:
            return int(json.load(handle)["cuda"]["version"].split(".")[0])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def find(cuda_home, flags, wanted, site_dirs):
    roots = wheel_roots(site_dirs)
    includes = [expand(d, cuda_home) for d in flags["includes"]]
    include = next((d for d in includes if os.path.isdir(d)), None)
    present = _present_headers(include) if include else set()
    # No CUDA home at all: no toolkit for FlashInfer to JIT with, nothing to complete.
    dirs = search_dirs(flags, cuda_home) if os.path.isdir(cuda_home) else []
    libs_present = _present_libs(dirs)
    libraries = soname_links(_lib_files(roots), set(wanted), dirs, libs_present, _cuda_major(cuda_home))
    return {
        "wheel_roots": roots,
        "cuda_home": cuda_home,
        "cuda_include": include,
        "lib_search_dirs": dirs,
        "headers": header_links(list(_walk_headers(roots)), include, present),
        "libraries": libraries,
        "unfixable": missing_libs(wanted, libs_present, libraries) if dirs else [],
    }


def probe_source(libs):
    """A C++ unit that includes each probed library's header and calls it (links only if ld finds the library)."""
    lines = [f"#include <{_PROBES[n][0]}>" for n in libs if n in _PROBES]
    body = " ".join(_PROBES[n][1] for n in libs if n in _PROBES) or "return 1;"
    return "\n".join([*lines, f'extern "C" int gb10_toolchain_probe(void) {{ {body} }}', ""])


def check_commands(cxx, cuda_home, flags, source, obj, out):
    """The compile and link argv, with FlashInfer's include line, its link line and its link driver."""
    includes = [arg for d in flags["includes"] for arg in ("-isystem", expand(d, cuda_home))]
    ldflags = [expand(f, cuda_home) for f in flags["ldflags"] + flags["module_ldflags"]]
    compile_argv = [cxx, "-std=c++17", *includes, "-fPIC", "-c", source, "-o", obj]
    return compile_argv, [cxx, obj, *ldflags, "-o", out]


def check(cuda_home, flags, environ, which=shutil.which):
    """Compile and link the probe with FlashInfer's flags. {"ok": True|False|None, ...}; None: could not run."""
    cxx = environ.get("CXX", "c++")
    if not os.path.isdir(cuda_home):
        # A C++ compiler alone (an image may carry g++ for torch's inductor) compiles no CUDA: the probe would fail
        # on the missing headers, not on a gap this script can close. The FlashInfer prebuild names what is missing.
        output = f"no CUDA toolkit at {cuda_home}: no toolchain to JIT with here"
        return {"ok": None, "stage": "compiler", "output": output}
    if not which(cxx):
        nvcc = os.path.join(cuda_home, "bin", "nvcc")
        if os.path.exists(nvcc):
            return {
                "ok": False,
                "stage": "compiler",
                "output": f"no C++ compiler {cxx!r} on PATH beside {nvcc}: FlashInfer compiles its .cpp units and"
                " links every JIT module with $CXX (else c++). Install g++ in the image or set CXX.",
            }
        return {"ok": None, "stage": "compiler", "output": f"no {cxx!r} and no {nvcc}: no toolchain to JIT with here"}
    with tempfile.TemporaryDirectory(prefix="gb10-toolchain-") as work:
        source = os.path.join(work, "probe.cpp")
        with open(source, "w", encoding="utf-8") as handle:
            handle.write(probe_source(link_libs(flags)))
        commands = check_commands(
            cxx, cuda_home, flags, source, os.path.join(work, "probe.o"), os.path.join(work, "probe.so")
        )
        for stage, argv in zip(("compile", "link"), commands, strict=True):
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                words = (done.stderr or done.stdout).strip().splitlines()[-8:]
                return {"ok": False, "stage": stage, "command": argv, "output": "\n".join(words)}
        return {"ok": True, "stage": "link", "command": commands[1], "output": ""}


def main(argv=None, environ=None):
    environ = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cuda-home", default="", help="default: flashinfer's own rule (CUDA_HOME, CUDA_PATH, nvcc)")
    parser.add_argument("--lib", action="append", default=[], help="default: the fused-MoE module's own -l flags")
    parser.add_argument("--apply", action="store_true")
    parser.add_argument("--no-check", action="store_true", help="skip the compile-and-link check")
    args = parser.parse_args(argv)
    cuda_home = args.cuda_home or flashinfer_cuda_home(environ)
    flags, flags_source = flashinfer_flags()
    report = {"flags_source": flags_source, "flags": flags, "applied": [], "remaining": [], "check": None}
    if flags is None:
        report["remaining"] = [f"FlashInfer's include and link flags are unknown: {flags_source}"]
        print(json.dumps(report, sort_keys=True))
        print(f"toolchain_gaps: {report['remaining'][0]}", file=sys.stderr)
        return 1
    wanted = args.lib or [f[2:] for f in flags["module_ldflags"] if f.startswith("-l")]
    site_dirs = site.getsitepackages()
    gaps = find(cuda_home, flags, wanted, site_dirs)
    report["found"] = gaps
    if args.apply:
        for link, target in gaps["headers"] + gaps["libraries"]:
            os.makedirs(os.path.dirname(link), exist_ok=True)
            os.symlink(target, link)
            report["applied"].append([link, target])
        after = find(cuda_home, flags, wanted, site_dirs)
        report["remaining"] = (
            after["headers"] + after["libraries"] + [f"-l{n}: in no wheel" for n in after["unfixable"]]
        )
        report["remaining"] += [link for link, _target in report["applied"] if not os.path.exists(link)]
    if not args.no_check:
        report["check"] = check(cuda_home, flags, environ)
    print(json.dumps(report, sort_keys=True))
    failed = report["check"] is not None and report["check"]["ok"] is False
    if failed:
        print(
            f"toolchain_gaps: FlashInfer's {report['check']['stage']} step fails with CUDA home {cuda_home}"
            f" ({flags_source}):\n{report['check']['output']}",
            file=sys.stderr,
        )
    return 1 if (args.apply and report["remaining"]) or failed else 0


if __name__ == "__main__":
    sys.exit(main())
