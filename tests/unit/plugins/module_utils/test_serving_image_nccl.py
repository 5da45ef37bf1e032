# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 39, item 4: the NCCL each node's serving image loads, read inside the image and recorded per node, and a
tensor-parallel group refused when its ranks load different builds, or one below the minimum with multi-node CUDA
graphs (vllm-project/vllm#42354, #41725: the field asks for NCCL >= 2.30.4; #52504: 2.28.9 hangs, 2.30.4 serves)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import pytest

from ansible_collections.gb10.serving.plugins.module_utils import _serving_image as si

WHEEL_LIB = "/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib/libnccl.so.2"
SYSTEM_LIB = "/usr/lib/aarch64-linux-gnu/libnccl.so.2.28.9"


def probe(distributions=None, libraries=(), so_path=""):
    return json.dumps({"distributions": distributions or {}, "libraries": list(libraries), "so_path": so_path})


def lib(path, sha, wheel, names=None):
    return {"path": path, "names": names or [path.rsplit("/", 1)[-1]], "sha256": sha, "wheel": wheel}


def test_image_nccl_prefers_the_wheel_torch_loads_then_the_system_library():
    both = probe(
        {"nvidia-nccl-cu13": "2.30.4"},
        [lib(WHEEL_LIB, "a" * 64, True), lib(SYSTEM_LIB, "b" * 64, False, ["libnccl.so.2", "libnccl.so.2.28.9"])],
    )
    found = si.image_nccl("torch warns first\n" + both)
    assert (found["version"], found["sha256"], found["source"]) == ("2.30.4", "a" * 64, "wheel nvidia-nccl-cu13")
    # an NGC-style image (torch linked to the system's NCCL): the version from the library's own file name
    system = si.image_nccl(probe({}, [lib(SYSTEM_LIB, "b" * 64, False, ["libnccl.so.2", "libnccl.so.2.28.9"])]))
    assert (system["version"], system["library"], system["source"]) == ("2.28.9", SYSTEM_LIB, "system library")
    # VLLM_NCCL_SO_PATH in the image's own environment names the one vLLM loads
    named = si.image_nccl(probe({"nvidia-nccl-cu12": "2.27.3"}, [lib(SYSTEM_LIB, "b" * 64, False)], SYSTEM_LIB))
    assert named["sha256"] == "b" * 64 and named["source"] == f"VLLM_NCCL_SO_PATH {SYSTEM_LIB}"


def test_image_nccl_of_a_cpu_image_is_none_and_said_so():
    found = si.image_nccl(probe())
    assert found["version"] is None and found["sha256"] is None
    assert (
        si.nccl_line("spark-1", found)
        == "spark-1: no NCCL in the image (its engine's collectives use none: a CPU build)"
    )
    with pytest.raises(ValueError, match="no JSON"):
        si.image_nccl("Traceback: ...")


def test_the_probe_reads_a_wheels_version_and_its_librarys_bytes(tmp_path):
    """NCCL_PROBE run by a real interpreter over an installed-looking nvidia-nccl-cu13 wheel: importlib.metadata's
    version and the library's sha256 (a build's identity: two builds of one version differ in their bytes)."""
    site = tmp_path / "site"
    (site / "nvidia" / "nccl" / "lib").mkdir(parents=True)
    library = site / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
    library.write_bytes(b"\x7fELF a build of NCCL 2.30.4")
    info = site / "nvidia_nccl_cu13-2.30.4.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-nccl-cu13\nVersion: 2.30.4\n")
    ran = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(site)!r}); exec({si.NCCL_PROBE!r})"],
        capture_output=True,
        text=True,
        check=True,
    )
    found = si.image_nccl(ran.stdout)
    assert found["version"] == "2.30.4" and found["source"] == "wheel nvidia-nccl-cu13"
    assert found["sha256"] == hashlib.sha256(library.read_bytes()).hexdigest() and found["library"] == str(library)


CHECK = {
    "ranks": ["spark-1", "spark-2"],
    "min_version": "2.30.4",
    "min_source": "the GB10 default",
    "cuda_graphs": True,
}


def nccl(version, sha):
    return {"version": version, "sha256": sha, "library": WHEEL_LIB, "source": "wheel nvidia-nccl-cu13"}


def test_pitfall_nccl_builds_differ_recorded_per_node_same_version_other_build_refused():
    # vllm-project/vllm#41725: the same 2.28.9 from the pip wheel and from DGX OS's libnccl2, two builds
    records = {"spark-1": nccl("2.30.4", "a" * 64), "spark-2": nccl("2.30.4", "c" * 64)}
    [problem] = si.nccl_group_problems(records, CHECK)
    assert "load different NCCL builds" in problem and "sha256 aaaaaaaaaaaa" in problem
    assert "sha256 cccccccccccc" in problem and "vllm-project/vllm#42354, #41725" in problem
    assert (
        si.nccl_group_problems({"spark-1": nccl("2.30.4", "a" * 64), "spark-2": nccl("2.30.4", "a" * 64)}, CHECK) == []
    )


def test_pitfall_nccl_builds_differ_recorded_per_node_below_the_minimum_with_cuda_graphs_only():
    records = {host: nccl("2.28.9", "d" * 64) for host in CHECK["ranks"]}
    problems = si.nccl_group_problems(records, CHECK)
    assert len(problems) == 2 and problems[0].startswith("spark-1: its image loads NCCL 2.28.9, below 2.30.4")
    assert "(the GB10 default)" in problems[0] and "enforce-eager: true" in problems[0]
    assert si.nccl_group_problems(records, dict(CHECK, cuda_graphs=False)) == []
    # release numbers, not strings: 2.30.10 is above 2.30.4
    assert si.nccl_group_problems({h: nccl("2.30.10", "e" * 64) for h in CHECK["ranks"]}, CHECK) == []


def test_pitfall_nccl_builds_differ_recorded_per_node_a_rank_without_a_record_is_refused():
    [problem] = si.nccl_group_problems({"spark-1": nccl("2.30.4", "a" * 64)}, CHECK)
    assert problem.startswith("no NCCL recorded on spark-2") and "run site.yml" in problem
    # a CPU image on every rank (the simulation's engine): one "build", nothing below a minimum
    none = {"version": None, "sha256": None, "library": None, "source": None}
    assert si.nccl_group_problems({host: dict(none) for host in CHECK["ranks"]}, CHECK) == []


def test_pitfall_nccl_builds_differ_recorded_per_node_preflight_judges_only_the_ranks_holding_the_planned_image():
    """node_preflight, before any change: a rank that holds no planned image yet is neither refused nor compared
    (distribute judges it once the gated image is on it); the ranks that hold one are held to one build and the
    minimum, with their node names, versions and the fix."""
    held = {"spark-1": nccl("2.30.4", "a" * 64), "spark-2": None}
    assert si.nccl_group_problems(held, CHECK, held_only=True) == []
    # without held_only (distribute, after the gated image is on every node) the rank without a record is refused
    assert si.nccl_group_problems(held, CHECK)[0].startswith("no NCCL recorded on spark-2")
    three = dict(CHECK, ranks=["spark-1", "spark-2", "spark-3"])
    records = {"spark-1": nccl("2.30.4", "a" * 64), "spark-2": nccl("2.28.9", "b" * 64), "spark-3": None}
    differ, below = si.nccl_group_problems(records, three, held_only=True)
    assert "spark-1: NCCL 2.30.4" in differ and "spark-2: NCCL 2.28.9" in differ and "spark-3" not in differ
    assert "Fix: serve one image by digest on every rank" in differ
    assert below.startswith("spark-2: its image loads NCCL 2.28.9, below 2.30.4") and "Fix: an image" in below


def record(local="gb10/vllm-serving:0123456789abcdef", image_id="sha256:" + "1" * 64, nccl_entry="default"):
    found = {"image": "registry:5000/gb10/vllm-serving@sha256:" + "2" * 64, "local": local, "id": image_id}
    found["nccl"] = nccl("2.30.4", "a" * 64) if nccl_entry == "default" else nccl_entry
    return found


def test_pitfall_nccl_builds_differ_recorded_per_node_record_reused_only_for_the_image_held():
    """node_preflight reuses a rank's gated-image record instead of a throwaway container only where the record is of
    the very image the rank holds under the planned name (local name and Id equal): one Id, one NCCL."""
    local, held = "gb10/vllm-serving:0123456789abcdef", {"id": "sha256:" + "1" * 64, "layers": ["sha256:" + "3" * 64]}
    assert si.record_nccl(record(), local, held) == nccl("2.30.4", "a" * 64)
    # another image now under that name (re-tagged, rebuilt), or a record of another planned image: read it again
    assert si.record_nccl(record(), local, dict(held, id="sha256:" + "4" * 64)) is None
    assert si.record_nccl(record(local="gb10/vllm-serving:fedcba9876543210"), local, held) is None
    # a record written before records carried nccl, none at all, or an image the node does not hold
    assert si.record_nccl(record(nccl_entry=None), local, held) is None
    assert si.record_nccl(None, local, held) is None
    assert si.record_nccl(record(), local, None) is None
    # a CPU image's record (no NCCL in it) is still a record of what the image loads
    cpu = {"version": None, "sha256": None, "library": None, "source": None}
    assert si.record_nccl(record(nccl_entry=cpu), local, held) == cpu


GATE = {
    "base": "registry:5000/gb10/vllm-standin@sha256:" + "5" * 64,
    "critical_pins": {"flashinfer-python": "0.6.18"},
    "ray_version": "2.55.0",
    "python": "/opt/venv/bin/python",
    "vllm_version": "0.32.0",
}


def test_gate_skipped_only_for_the_image_held_gated_with_the_same_inputs():
    """The build node skips the image gate's throwaway containers only where its record says the gate passed the
    very image it holds under the planned name (local name and Id) with every input the same; any change gates again."""
    local, held = "gb10/vllm-serving:0123456789abcdef", {"id": "sha256:" + "1" * 64, "layers": ["sha256:" + "3" * 64]}
    gated = dict(record(), gate=dict(GATE))
    assert si.record_gated(gated, local, held, GATE) is True
    # another image under that name, a record of another planned image, no image held, no record
    assert si.record_gated(gated, local, dict(held, id="sha256:" + "4" * 64), GATE) is False
    assert si.record_gated(dict(gated, local="gb10/vllm-serving:fedcba9876543210"), local, held, GATE) is False
    assert si.record_gated(gated, local, None, GATE) is False
    assert si.record_gated(None, local, held, GATE) is False
    # a record written before records carried the gate's inputs
    assert si.record_gated(record(), local, held, GATE) is False
    # each input changed: a critical pin, ray, the stated vLLM release, the base, the Python
    for key, value in (
        ("critical_pins", {"flashinfer-python": "0.6.19"}),
        ("ray_version", "2.56.0"),
        ("vllm_version", "0.32.1"),
        ("base", "registry:5000/gb10/vllm-standin@sha256:" + "6" * 64),
        ("python", "/usr/bin/python3"),
    ):
        assert si.record_gated(gated, local, held, dict(GATE, **{key: value})) is False, key


def test_distribution_skipped_only_where_every_node_holds_the_recorded_image():
    """A converge with nothing to change skips the tag, push, read, pull and naming of the gated image only where
    every node of the play holds the planned image (one Id) and each record states one reference of it, a digest in
    the registry configured now; a node added (no image, no record), a record of another image or Id, records that
    disagree or a reference outside the registry: distribute."""
    local, name, registry = "gb10/vllm-serving:0123456789abcdef", "gb10/vllm-serving", "registry:5000"
    held = {"id": "sha256:" + "1" * 64, "layers": ["sha256:" + "3" * 64]}
    ref = record()["image"]
    both = {"spark-1": (record(), held), "spark-2": (record(), held)}
    assert si.distributed_ref(both, local, registry, name) == ref
    # a node added to the inventory: neither image nor record
    assert si.distributed_ref({**both, "spark-3": (None, None)}, local, registry, name) is None
    # the image without a record (a run that stopped before writing it), a record of another planned image
    assert si.distributed_ref({**both, "spark-2": (None, held)}, local, registry, name) is None
    other = record(local="gb10/vllm-serving:fedcba9876543210")
    assert si.distributed_ref({**both, "spark-2": (other, held)}, local, registry, name) is None
    # another image under the planned name on one node (its record says the old Id)
    retagged = dict(held, id="sha256:" + "4" * 64)
    assert si.distributed_ref({**both, "spark-2": (record(), retagged)}, local, registry, name) is None
    # records of one Id that state different references, or a record and image of another Id on one node
    moved = dict(record(), image="registry:5000/gb10/vllm-serving@sha256:" + "5" * 64)
    assert si.distributed_ref({**both, "spark-2": (moved, held)}, local, registry, name) is None
    other_id = (record(image_id=retagged["id"]), retagged)
    assert si.distributed_ref({**both, "spark-2": other_id}, local, registry, name) is None
    # the registry changed, or a reference that is no digest
    assert si.distributed_ref(both, local, "registry.lab:5000", name) is None
    tagged = dict(record(), image="registry:5000/gb10/vllm-serving:latest")
    assert si.distributed_ref({"spark-1": (tagged, held)}, local, registry, name) is None
    # without a registry the record names the local image itself
    plain = dict(record(), image=local)
    assert si.distributed_ref({"spark-1": (plain, held)}, local, "", name) == local
    assert si.distributed_ref(both, local, "", name) is None
    assert si.distributed_ref({}, local, registry, name) is None
