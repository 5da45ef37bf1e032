"""Write the stand-in's FlashInfer JIT-cache wheels: the shim and one provider per architecture, laid out as 0.7's.

``make_wheels.py DEST sm121a [sm120a ...]`` writes into DEST:

- ``flashinfer_jit_cache-<version>+cu130-py3-none-any.whl``, the shim: package ``flashinfer_jit_cache``
  (``__init__.py`` with ``get_jit_cache_providers()``, ``_build_meta.py`` with ``__version__``), METADATA
  ``Requires-Dist: flashinfer-jit-cache-<tag>==<version>`` for each provider;
- ``flashinfer_jit_cache_<tag>-<version>+cu130-cp39-abi3-manylinux_2_28_<machine>.whl`` per architecture tag, a
  provider: package ``flashinfer_jit_cache.providers.<tag>`` (``__init__.py`` with ``get_provider()``,
  ``_build_meta.py``, ``manifest.json`` with schema_version 1, provider_id, distribution, version,
  cuda_architectures and modules, ``jit_cache/<module>/<module>.so``) and the entry point
  ``[flashinfer.jit_cache.providers] <tag> = flashinfer_jit_cache.providers.<tag>:get_provider``.

Where that layout comes from is in ../README.md ("Prebuilt modules"). The module in a provider is the stand-in's
fused-MoE module for that architecture, built by the stand-in's own JitSpec (the real provider build compiles
flashinfer's JitSpecs ahead of time, aot.compile_and_package_modules) in a scratch workspace with the caller's
environment (GB10_STANDIN_MOE_UNITS and GB10_STANDIN_UNIT_WORK size it). The version is the stand-in's (0.6.18)
with the CUDA local suffix, so the stand-in's version check takes it as 0.7.2.post1 takes its own.
"""

import json
import os
import platform
import re
import subprocess
import sys
import tempfile
from pathlib import Path

# One wheel writer for the simulation's stand-in wheels (sim/wheelhouse/fake_wheel.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "wheelhouse"))
from fake_wheel import build_wheel

STANDIN = Path(__file__).resolve().parents[1]
CUDA_LABEL = "cu130"
GROUP = "flashinfer.jit_cache.providers"
# The fused-MoE generator per architecture major (flashinfer/jit/fused_moe.py; 12.x shares sm120's).
GENERATORS = {12: "gen_cutlass_fused_moe_sm120_module", 10: "gen_cutlass_fused_moe_sm100_module",
              9: "gen_cutlass_fused_moe_sm90_module"}  # fmt: skip

SHIM = '''"""Stand-in of the flashinfer-jit-cache shim: the providers installed beside it, by their entry points."""

import importlib.metadata
import json
from pathlib import Path
from types import SimpleNamespace

from ._build_meta import __version__

GROUP = "flashinfer.jit_cache.providers"


def get_jit_cache_providers():
    providers = []
    for entry_point in importlib.metadata.entry_points(group=GROUP):
        manifest = entry_point.load()()
        if manifest.get("schema_version") != 1:
            continue
        providers.append(SimpleNamespace(
            provider_id=entry_point.name, distribution=manifest["distribution"], version=manifest["version"],
            jit_cache_dir=str(Path(manifest["jit_cache_dir"]).resolve()),
            cuda_architectures=frozenset(manifest["cuda_architectures"]), modules=frozenset(manifest["modules"]),
        ))
    return tuple(sorted(providers, key=lambda provider: provider.provider_id))
'''

PROVIDER = '''"""Stand-in of one flashinfer-jit-cache provider: its manifest and the folder of its prebuilt modules."""

import json
from pathlib import Path

from ._build_meta import __version__  # noqa: F401

_HERE = Path(__file__).resolve().parent


def get_provider():
    manifest = json.loads((_HERE / "manifest.json").read_text())
    manifest["jit_cache_dir"] = str(_HERE / "jit_cache")
    return manifest
'''


def parse_tag(tag):
    """sm121a -> (12, 1, "a")."""
    match = re.fullmatch(r"sm(\d+)(\d)([af]?)", tag)
    if match is None:
        raise SystemExit(f"{tag!r}: give an architecture tag such as sm121a, sm120f or sm90a")
    return int(match.group(1)), int(match.group(2)), match.group(3)


BUILD = """
import json, sys
from flashinfer.jit import fused_moe
spec = getattr(fused_moe, sys.argv[1])(use_fast_build=False)
spec.build()
print(json.dumps({"name": spec.name, "library": str(spec.jit_library_path)}))
"""


def build_module(tag):
    """The stand-in's fused-MoE module for ``tag``, compiled in a scratch workspace: (module name, .so bytes)."""
    major, minor, suffix = parse_tag(tag)
    with tempfile.TemporaryDirectory(prefix="gb10-jit-cache-") as scratch:
        env = {
            **os.environ,
            "PYTHONPATH": str(STANDIN),
            "FLASHINFER_WORKSPACE_BASE": scratch,
            "FLASHINFER_CUDA_ARCH_LIST": f"{major}.{minor}{suffix}",
            "FLASHINFER_JIT_DEBUG": "0",
        }
        done = subprocess.run(
            [sys.executable, "-c", BUILD, GENERATORS[major]], env=env, capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise SystemExit(f"building the stand-in module for {tag} failed:\n{done.stdout}{done.stderr}")
        built = json.loads(done.stdout.strip().splitlines()[-1])
        return built["name"], Path(built["library"]).read_bytes()


def standin_version():
    text = (STANDIN / "flashinfer" / "__init__.py").read_text()
    return re.search(r'__version__ = "([^"]+)"', text).group(1)


def make(dest, tags):
    version = f"{standin_version()}+{CUDA_LABEL}"
    meta = f'__version__ = "{version}"\n__git_version__ = "gb10-sim"\n'
    wheels = []
    for tag in tags:
        module, library = build_module(tag)
        package = f"flashinfer_jit_cache/providers/{tag}"
        distribution = f"flashinfer-jit-cache-{tag}"
        manifest = {"schema_version": 1, "provider_id": tag, "distribution": distribution, "version": version,
                    "cuda_architectures": [tag], "modules": [module]}  # fmt: skip
        files = {
            f"{package}/__init__.py": PROVIDER.encode(),
            f"{package}/_build_meta.py": meta.encode(),
            f"{package}/manifest.json": (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode(),
            f"{package}/jit_cache/{module}/{module}.so": library,
        }
        entry = f"[{GROUP}]\n{tag} = flashinfer_jit_cache.providers.{tag}:get_provider\n"
        wheel_tag = f"cp39-abi3-manylinux_2_28_{platform.machine()}"
        wheels.append(build_wheel(dest, distribution, version, files, tag=wheel_tag, entry_points=entry))
    shim = {"flashinfer_jit_cache/__init__.py": SHIM.encode(), "flashinfer_jit_cache/_build_meta.py": meta.encode()}
    requires = [f"flashinfer-jit-cache-{tag}=={version}" for tag in tags]
    wheels.append(build_wheel(dest, "flashinfer-jit-cache", version, shim, requires=requires))
    return wheels


def main(argv):
    if len(argv) < 2:
        raise SystemExit(__doc__)
    for wheel in make(argv[0], argv[1:]):
        print(wheel)


if __name__ == "__main__":
    main(sys.argv[1:])
