# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/serving_image on two simulated nodes with the local registry (issue 5's done-when cases).

The nodes are made by the simulation's own scripts under a prefix and subnet of their own (GB10_IT_SERVING_IMAGE_PREFIX,
GB10_IT_SERVING_IMAGE_SUBNET; default gb10-it-serving-image on 10.82.0). The base stands in for the community vLLM
image: the vLLM stand-in (gb10-sim/vllm-standin:0.32.0) where it was built, else the simulation's Debian root with a
venv; either way with a flashinfer-python 0.6.18 pin and the CUDA pip-wheel layout of a real image that exhibits both
toolchain gaps (nvrtc.h only in nvidia/cu13/include, libnvrtc.so.13 without libnvrtc.so). It is pushed to the
registry inside a node and referenced by digest. The ray layer installs real Ray from sim/wheelhouse (air-gapped).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _shell import sh

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
PREFIX = os.environ.get("GB10_IT_SERVING_IMAGE_PREFIX", "gb10-it-serving-image")
SUBNET = os.environ.get("GB10_IT_SERVING_IMAGE_SUBNET", "10.82.0")
SIM_ENV = {**os.environ, "SIM_PREFIX": PREFIX, "SIM_NETWORK": PREFIX, "SIM_SUBNET_BASE": SUBNET, "SIM_NODES": "2"}
STANDIN = "gb10-sim/vllm-standin:0.32.0"
BASE_REPO = "registry:5000/gb10-test/vllm-base"
WHEELHOUSE = REPO / "sim" / "build" / "wheelhouse"

pytestmark = pytest.mark.skipif(
    subprocess.run(["docker", "info"], capture_output=True, check=False).returncode != 0,
    reason="no Docker engine answers",
)

BASE_DOCKERFILE = """\
FROM {parent}
COPY *.whl /tmp/base-wheels/
RUN {venv_setup} && /opt/venv/bin/python {pip} install --no-index --no-deps --no-cache-dir /tmp/base-wheels/gb10* \
      /tmp/base-wheels/nvidia* {flashinfer} \
 && mkdir -p /usr/local/cuda/include && echo '/* cuda.h stand-in */' > /usr/local/cuda/include/cuda.h \
 && rm -rf /tmp/base-wheels
ENV PATH=/opt/venv/bin:$PATH
"""


def node(i):
    return f"{PREFIX}-spark-{i}"


def in_node(i, *argv, **kwargs):
    return sh(["docker", "exec", "-i", node(i), *argv], **kwargs)


@pytest.fixture(scope="module")
def sim():
    subprocess.run([REPO / "sim" / "up.sh"], check=True, env=SIM_ENV)
    yield
    subprocess.run([REPO / "sim" / "down.sh"], check=True, env=SIM_ENV)


@pytest.fixture(scope="module")
def wheelhouse():
    subprocess.run([REPO / "sim" / "wheelhouse" / "prepare.sh"], check=True)
    return WHEELHOUSE


def _fake_wheel(dest, name, version, *files):
    sh([sys.executable, REPO / "sim" / "wheelhouse" / "fake_wheel.py", dest, name, version, *files])


@pytest.fixture(scope="module")
def base_ref(sim, tmp_path_factory):
    """Build the stand-in base inside spark-1 (its own engine), push it to the registry, return it by digest."""
    ctx = tmp_path_factory.mktemp("base")
    _fake_wheel(
        ctx,
        "nvidia-cuda-nvrtc",
        "13.0.88",
        "nvidia/cu13/include/nvrtc.h=/* nvrtc */",
        "nvidia/cu13/lib/libnvrtc.so.13=ELF",
    )
    _fake_wheel(ctx, "gb10-base-marker", "1.0")
    if subprocess.run(["docker", "image", "inspect", STANDIN], capture_output=True, check=False).returncode == 0:
        sh(f"docker save {STANDIN} | docker exec -i {node(1)} docker load", shell=True)
        parent, venv_setup, pip, flashinfer = STANDIN, "true", "-m pip", ""
    else:
        root = REPO / "sim" / "build" / "rootfs-base"
        sh(f"tar -C {root} -c . | docker exec -i {node(1)} docker import - gb10-test/debian:bookworm", shell=True)
        sh([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:", "pip", "-d", ctx])
        _fake_wheel(ctx, "flashinfer-python", "0.6.18", 'flashinfer/__init__.py=__version__ = "0.6.18"')
        pip_wheel = next(ctx.glob("pip-*.whl")).name
        parent, venv_setup = "gb10-test/debian:bookworm", "python3 -m venv --without-pip /opt/venv"
        pip, flashinfer = f"/tmp/base-wheels/{pip_wheel}/pip", f"/tmp/base-wheels/{pip_wheel} /tmp/base-wheels/flash*"
    (ctx / "Dockerfile").write_text(
        BASE_DOCKERFILE.format(parent=parent, venv_setup=venv_setup, pip=pip, flashinfer=flashinfer)
    )
    # The node's /tmp is a tmpfs, which docker cp cannot write into: stream the context with tar instead.
    in_node(1, "sh", "-c", "rm -rf /root/base-ctx && mkdir -p /root/base-ctx")
    sh(f"tar -C {ctx} -c . | docker exec -i {node(1)} tar -x -C /root/base-ctx", shell=True)
    in_node(1, "docker", "build", "--network", "host", "-q", "-t", f"{BASE_REPO}:dev", "/root/base-ctx")
    in_node(1, "docker", "push", "-q", f"{BASE_REPO}:dev")
    digests = in_node(1, "docker", "image", "inspect", "-f", "{{json .RepoDigests}}", f"{BASE_REPO}:dev").stdout
    return next(d for d in json.loads(digests) if d.startswith(BASE_REPO + "@"))


@pytest.fixture(scope="module")
def inventory(sim, tmp_path_factory):
    inv = tmp_path_factory.mktemp("inventory")
    hosts = {
        "all": {
            "children": {
                "gb10_nodes": {"hosts": {f"spark-{i}": {"ansible_host": node(i)} for i in (1, 2)}},
                "gb10_ray_head": {"hosts": {"spark-1": None}},
                "gb10_ray_workers": {"hosts": {"spark-2": None}},
            }
        }
    }
    (inv / "hosts.yml").write_text(yaml.safe_dump(hosts))
    for folder in ("group_vars", "host_vars"):
        (inv / folder).symlink_to(REPO / "inventories" / "sim" / folder)
    (inv / "play.yml").write_text(
        "- name: The serving image\n  hosts: gb10_nodes\n  gather_facts: false\n  roles:\n"
        "    - role: gb10.serving.serving_image\n"
    )
    return inv


def play(inventory, base, **extra):
    extra_vars = {
        "serving_image_base_ref": base,
        "serving_image_wheelhouse": str(WHEELHOUSE),
        "serving_image_registry": "registry:5000",
        "serving_image_critical_pins": {"flashinfer-python": "0.6.18"},
        **extra,
    }
    env = {**os.environ, "SIM_SUBNET_BASE": SUBNET, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")}
    return subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", inventory / "hosts.yml", inventory / "play.yml", "-e", json.dumps(extra_vars)],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )


def record(i):
    out = subprocess.run(
        ["docker", "exec", node(i), "cat", "/var/lib/gb10/serving-image.json"], capture_output=True, check=False
    )
    return json.loads(out.stdout) if out.returncode == 0 else None


def test_tag_refused(inventory, base_ref):
    result = play(inventory, f"{BASE_REPO}:dev")
    assert result.returncode != 0
    assert "is not pinned by digest" in result.stdout, result.stdout[-3000:]
    assert record(1) is None and record(2) is None


def test_unknown_digest_refused(inventory, base_ref):
    result = play(inventory, f"{BASE_REPO}@sha256:{'0' * 63}1")
    assert result.returncode != 0
    assert "does not serve that digest" in result.stdout, result.stdout[-3000:]
    assert record(1) is None and record(2) is None


def test_happy_path_both_nodes(inventory, base_ref, wheelhouse):
    result = play(inventory, base_ref)
    assert result.returncode == 0, result.stdout[-5000:]
    first, second = record(1), record(2)
    assert first == second, (first, second)
    assert first["image"].startswith("registry:5000/gb10/vllm-serving@sha256:")
    assert first["base"] == base_ref
    labels = in_node(2, "docker", "image", "inspect", "-f", "{{json .Config.Labels}}", first["image"]).stdout
    assert json.loads(labels)["org.gb10.serving.base-digest"] == base_ref.split("@")[1]
    report = json.loads(
        in_node(
            2,
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            first["image"],
            "cat",
            "/usr/local/lib/gb10/toolchain_gaps.json",
        ).stdout
    )
    applied = dict(report["applied"])
    assert applied["/usr/local/cuda/include/nvrtc.h"].endswith("nvidia/cu13/include/nvrtc.h")
    # Where FlashInfer's link line searches (-L$cuda_home/lib64), not beside the SONAME (issue 17).
    assert applied["/usr/local/cuda/lib64/libnvrtc.so"].endswith("nvidia/cu13/lib/libnvrtc.so.13"), applied
    assert report["remaining"] == []
    # The stand-in base has neither c++ nor nvcc (its nvrtc is text): the link check cannot run there. The real link
    # is tests/integration/test_toolchain_gaps_real_wheels.py.
    assert report["check"]["ok"] is None, report["check"]
    again = play(inventory, base_ref)
    assert again.returncode == 0, again.stdout[-3000:]
    assert "changed=0" in again.stdout.split("PLAY RECAP")[-1], again.stdout.split("PLAY RECAP")[-1]


def test_pitfall_ray_layer_moves_flashinfer_pin(inventory, base_ref, wheelhouse):
    before = record(1)
    result = play(inventory, base_ref, serving_image_extra_pins={"flashinfer-python": "0.6.17"})
    assert result.returncode != 0
    assert "moved base pin flashinfer-python 0.6.18 -> 0.6.17" in result.stdout, result.stdout[-3000:]
    assert "critical pin flashinfer-python==0.6.18" in result.stdout
    assert record(1) == before and record(2) == before


def test_pitfall_profile_states_another_vllm_than_the_image_carries(inventory, base_ref, wheelhouse):
    # issue 38 item 2: the gate reads the vLLM inside the image (the stand-in carries vllm 0.32.0; the Debian fallback
    # base none) and refuses the profile's other release before the image is pushed or recorded
    before = record(1)
    result = play(inventory, base_ref, serving_image_vllm_version="0.31.0")
    assert result.returncode != 0
    standin = subprocess.run(["docker", "image", "inspect", STANDIN], capture_output=True, check=False).returncode == 0
    carried = "carries vLLM 0.32.0 (vllm 0.32.0)" if standin else "carries no vLLM"
    assert "spark-1: gb10/vllm-serving:" in result.stdout and carried in result.stdout, result.stdout[-3000:]
    assert "states image.vllm_version 0.31.0" in result.stdout
    assert record(1) == before and record(2) == before


def test_pitfall_node_holds_other_image(inventory, base_ref, wheelhouse):
    local = record(2)["local"]
    # Node 2 only ever pulled the built image, not the base: fetch the base there to plant it under the name.
    in_node(2, "docker", "pull", "-q", base_ref)
    in_node(2, "docker", "tag", base_ref, local)
    result = play(inventory, base_ref)
    assert result.returncode != 0
    assert "node spark-2 holds another image under " + local in result.stdout, result.stdout[-3000:]
