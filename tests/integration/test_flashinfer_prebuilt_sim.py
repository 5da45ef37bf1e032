# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 38 item 4, live on a simulated node: an image that carries FlashInfer's prebuilt module for the node's
architecture builds nothing and serves without a rebuild; one that carries it for another architecture only
(flashinfer#5238: a prebuilt module without an SM12x image taking precedence over the JIT) builds as before.

One node of the simulation (its own prefix and subnet: GB10_IT_FI_PREBUILT_PREFIX, GB10_IT_FI_PREBUILT_NETWORK,
GB10_IT_FI_PREBUILT_SUBNET; default gb10-it-fi-prebuilt on 10.86.0). Two image variants of the vLLM stand-in
(gb10-sim/vllm-standin:0.32.0), each with the FlashInfer stand-in's JIT-cache shim and one provider wheel laid out as
flashinfer 0.7's (sim/flashinfer_standin/jit_cache/make_wheels.py, sim/flashinfer_standin/README.md): sm121a (GB10's
compute capability 12.1) and sm120a. The variants also carry the repository's FlashInfer stand-in package over the
image's, so the test does not wait for a rebuild of the shared stand-in image, and a C compiler that records each
call (CC, as the plan's environment of a node gives it) into the cache. They are pushed to the simulation's registry
inside the node and referenced by digest, as the gate records a serving image.

The playbook runs roles/flashinfer_jit on the node for each image, then, for the sm121a image, the serving role's
identity module (gb10.serving.flashinfer_jit_identity) with the serving unit's environment, and the serving call
(the vLLM stand-in's ensure_fused_moe, vLLM's get_cutlass_fused_moe_module) in a container of that image.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from _shell import sh

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.stamps import cache_state
from ansible_collections.gb10.serving.plugins.module_utils._plan.context import CONTAINER_PATHS

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
PREFIX = os.environ.get("GB10_IT_FI_PREBUILT_PREFIX", "gb10-it-fi-prebuilt")
NETWORK = os.environ.get("GB10_IT_FI_PREBUILT_NETWORK", PREFIX)
SUBNET = os.environ.get("GB10_IT_FI_PREBUILT_SUBNET", "10.86.0")
SIM_ENV = {**os.environ, "SIM_PREFIX": PREFIX, "SIM_NETWORK": NETWORK, "SIM_SUBNET_BASE": SUBNET, "SIM_NODES": "1"}
STANDIN = "gb10-sim/vllm-standin:0.32.0"
LOCAL = "gb10-it/fi-prebuilt"
REMOTE = "registry:5000/gb10-it/fi-prebuilt"
# The container path the plan states (container_paths), where the role builds and the serving units mount.
WORKSPACE = CONTAINER_PATHS["flashinfer_workspace_base"]
TRACE_CC = "/usr/local/bin/gb10-trace-cc"
CALLS = "compiler-calls"
BUILD = ".cache/flashinfer/0.6.18/121a/cached_ops/fused_moe_120"
GENERATED = ".cache/flashinfer/0.6.18/121a/generated/"
# A smaller stand-in module than the sim inventory's (flashinfer_jit_env in inventories/sim/group_vars/all/sim.yml,
# 12 units of work 150) keeps the trap case's build short; the traced CC as the plan's environment of the node.
SIZE = {"GB10_STANDIN_MOE_UNITS": "4", "GB10_STANDIN_UNIT_WORK": "40"}
ENV = {"CC": TRACE_CC, **SIZE}
STARTED = time.monotonic()
CASES = {"sm121a": "/var/lib/gb10/fi-prebuilt-sm121a", "sm120a": "/var/lib/gb10/fi-prebuilt-sm120a"}

pytestmark = pytest.mark.skipif(
    subprocess.run(["docker", "image", "inspect", STANDIN], capture_output=True, check=False).returncode != 0,
    reason=f"no {STANDIN} here (make sim-images builds it)",
)

DOCKERFILE = f"""\
FROM {STANDIN}
COPY flashinfer /tmp/standin-flashinfer
COPY wheels /tmp/jit-cache
RUN site=$(python3 -c 'import flashinfer, os; print(os.path.dirname(flashinfer.__file__))') \\
 && cp -r /tmp/standin-flashinfer/. "$site"/ \\
 && python3 -m pip install -q --no-index --no-deps /tmp/jit-cache/*.whl \\
 && printf '#!/bin/sh\\necho "$*" >> "$FLASHINFER_WORKSPACE_BASE/{CALLS}"\\nexec gcc "$@"\\n' > {TRACE_CC} \\
 && chmod 0755 {TRACE_CC} && rm -rf /tmp/standin-flashinfer /tmp/jit-cache
"""

# On a site roles/serving_image runs before this role and installs the Docker SDK its modules need (install.yml).
SDK = """\
- name: The Docker SDK, as roles/serving_image installs it
  hosts: gb10_nodes
  gather_facts: false
  tasks:
    - name: Install the Docker SDK the community.docker modules use on the node
      ansible.builtin.apt:
        name: "{{ serving_image_docker_sdk_package | default('python3-docker') }}"
        state: present
        update_cache: true
        cache_valid_time: 86400
"""

PLAY = """\
- name: FlashInfer prebuild, image {tag}
  hosts: gb10_nodes
  gather_facts: false
  vars:
    flashinfer_jit_image_ref: "{ref}"
    flashinfer_jit_cache_dir: {cache}
  roles:
    - role: gb10.serving.flashinfer_jit
"""

IDENTITY = """\
- name: The serving unit's identity check and serving call, image sm121a
  hosts: gb10_nodes
  gather_facts: false
  vars:
    _ref: "{ref}"
    _cache: {cache}
    _env_file: /var/lib/gb10/fi-prebuilt-scratch/engine.env
    _docker: [docker, run, --rm, --network, none, --pull, never, --env-file, "{{{{ _env_file }}}}",
              --volume, "{{{{ _cache }}}}:{workspace}", --volume, "{entry}:/opt/gb10/flashinfer_prebuild.py:ro",
              --entrypoint, python3, "{{{{ _ref }}}}"]
  tasks:
    - name: Compare the serving unit's build.ninja and prebuilt modules with the prebuild's
      gb10.serving.flashinfer_jit_identity:
        node: "{{{{ inventory_hostname }}}}"
        cache_dir: "{{{{ _cache }}}}"
        image: "{{{{ _ref }}}}"
        argv: "{{{{ _docker + ['/opt/gb10/flashinfer_prebuild.py', '--ninja-only'] }}}}"
        env_files: [{{path: "{{{{ _env_file }}}}", content: "{env}"}}]
        scratch_dir: /var/lib/gb10/fi-prebuilt-scratch
      register: identity

    - name: Write the serving unit's environment file for the serving call
      ansible.builtin.copy:
        dest: "{{{{ _env_file }}}}"
        content: "{env}"
        mode: "0600"

    - name: The serving call, as vLLM's flashinfer_cutlass MoE path makes it
      ansible.builtin.command:
        argv: "{{{{ _docker + ['-c', serving_call] }}}}"
      vars:
        serving_call: >-
          import json; from vllm._standin.jit import ensure_fused_moe;
          out = ensure_fused_moe((12, 1), lambda line: None);
          maps = [line.split()[-1] for line in open('/proc/self/maps') if line.rstrip().endswith('.so')];
          print('GB10_SERVING_CALL ' + json.dumps(dict(out, mapped=sorted(set(maps)))))
      register: serving
      changed_when: false

    - name: Hand the results back
      ansible.builtin.copy:
        dest: /var/lib/gb10/fi-prebuilt-scratch/results.json
        content: "{{{{ {{'identity_same': identity.same, 'serving': serving.stdout}} | to_json }}}}"
        mode: "0600"
"""


def node():
    return f"{PREFIX}-spark-1"


def in_node(*argv, **kwargs):
    return sh(["docker", "exec", "-i", node(), *argv], **kwargs)


@pytest.fixture(scope="module")
def sim():
    subprocess.run([REPO / "sim" / "up.sh"], check=True, env=SIM_ENV)
    print(f"node up: {time.monotonic() - STARTED:.1f} s")
    yield
    subprocess.run([REPO / "sim" / "down.sh"], check=True, env=SIM_ENV)


@pytest.fixture(scope="module")
def images(sim, tmp_path_factory):
    """{tag: repository@sha256 reference} of the two variants, pushed from the node to the simulation's registry."""
    refs = {}
    for tag in CASES:
        ctx = tmp_path_factory.mktemp(f"image-{tag}")
        (ctx / "wheels").mkdir()
        env = {**os.environ, "CC": "gcc", "GB10_STANDIN_MOE_UNITS": "2", "GB10_STANDIN_UNIT_WORK": "10"}
        sh([sys.executable, REPO / "sim" / "flashinfer_standin" / "jit_cache" / "make_wheels.py", ctx / "wheels", tag],
           env=env)  # fmt: skip
        sh(["cp", "-r", REPO / "sim" / "flashinfer_standin" / "flashinfer", ctx / "flashinfer"])
        (ctx / "Dockerfile").write_text(DOCKERFILE)
        sh(["docker", "build", "-q", "-t", f"{LOCAL}:{tag}", str(ctx)])
    print(f"images built: {time.monotonic() - STARTED:.1f} s")
    sh(
        f"docker save {' '.join(f'{LOCAL}:{tag}' for tag in CASES)} | docker exec -i {node()} docker load -q",
        shell=True,
    )
    print(f"images loaded: {time.monotonic() - STARTED:.1f} s")
    for tag in CASES:
        in_node("docker", "tag", f"{LOCAL}:{tag}", f"{REMOTE}:{tag}")
        in_node("docker", "push", "-q", f"{REMOTE}:{tag}")
        digests = json.loads(
            in_node("docker", "image", "inspect", "-f", "{{json .RepoDigests}}", f"{REMOTE}:{tag}").stdout
        )
        refs[tag] = next(d for d in digests if d.startswith(REMOTE + "@"))
    print(f"images pushed: {time.monotonic() - STARTED:.1f} s")
    return refs


@pytest.fixture(scope="module")
def converged(images, tmp_path_factory):
    """One playbook run: the role for each image, then the identity check and the serving call for sm121a's."""
    inv = tmp_path_factory.mktemp("inventory")
    hosts = {"all": {"children": {"gb10_nodes": {"hosts": {"spark-1": {"ansible_host": node()}}}}}}
    (inv / "hosts.yml").write_text(yaml.safe_dump(hosts))
    for folder in ("group_vars", "host_vars"):
        (inv / folder).symlink_to(REPO / "inventories" / "sim" / folder)
    env_text = "".join(f"{key}={value}\\n" for key, value in {"FLASHINFER_WORKSPACE_BASE": WORKSPACE, **ENV}.items())
    plays = [SDK] + [PLAY.format(tag=tag, ref=images[tag], cache=cache) for tag, cache in CASES.items()]
    plays.append(
        IDENTITY.format(
            ref=images["sm121a"],
            cache=CASES["sm121a"],
            workspace=WORKSPACE,
            entry="/usr/local/libexec/gb10/flashinfer_prebuild.py",
            env=env_text,
        )
    )
    (inv / "play.yml").write_text("---\n" + "\n".join(plays))
    # The plan's part the role reads: this node's environment, the containers' paths, and no serving unit to stop.
    plan = {"nodes": {"spark-1": {"env": ENV}}, "container_paths": CONTAINER_PATHS, "units": {"all": [], "agents": []}}
    extra = {"gb10_plan": plan, "flashinfer_jit_share": False, "flashinfer_jit_env": SIZE}
    started = time.monotonic()
    done = subprocess.run(
        [ANSIBLE_PLAYBOOK, "-i", inv / "hosts.yml", inv / "play.yml", "-e", json.dumps(extra)],
        capture_output=True,
        text=True,
        env={**os.environ, "SIM_SUBNET_BASE": SUBNET, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg")},
        cwd=REPO,
        check=False,
    )
    print(f"playbook: {time.monotonic() - started:.1f} s")
    if os.environ.get("GB10_IT_FI_PREBUILT_LOG"):
        Path(os.environ["GB10_IT_FI_PREBUILT_LOG"]).write_text(done.stdout)
    assert done.returncode == 0, done.stdout[-6000:]
    return done.stdout, json.loads(in_node("cat", "/var/lib/gb10/fi-prebuilt-scratch/results.json").stdout)


def cache_files(cache):
    """Every file under the case's cache folder, relative to it."""
    listed = in_node("find", cache, "-type", "f").stdout.split()
    return sorted(path[len(cache) + 1 :] for path in listed)


def stamp(cache):
    return json.loads(in_node("cat", f"{cache}/{BUILD}/gb10-prebuild.json").stdout)


def test_prebuilt_module_for_the_nodes_architecture_builds_nothing_and_serves_without_a_rebuild(images, converged):
    _out, results = converged
    cache = CASES["sm121a"]
    found = stamp(cache)
    assert found["kind"] == "prebuilt" and found["build_seconds"] == 0, found
    assert [item["provider"] for item in found["aot"]] == ["sm121a"], found["aot"]
    provider_so = found["aot"][0]["path"]
    assert provider_so.endswith("/flashinfer_jit_cache/providers/sm121a/jit_cache/fused_moe_120/fused_moe_120.so")
    # Nothing built: no build.ninja written, ninja never ran (no .ninja_log), no object, no .so, no compiler call.
    # Only the generator's CUTLASS instantiation sources are there: flashinfer writes them when it makes the JitSpec,
    # before try_load (jit/fused_moe.py), and so does the stand-in.
    files = cache_files(cache)
    built = [path for path in files if not path.startswith(GENERATED)]
    assert built == [f"{BUILD}/gb10-prebuild.json", f"{BUILD}/gb10-prebuild.log"], files
    assert all(path.endswith(".generated.c") for path in files if path.startswith(GENERATED)), files
    present, reason = cache_state(
        {"image_digest": images["sm121a"], "flashinfer_version": "0.6.18", "compute_capability": "12.1"}, found, None
    )
    assert present, reason
    # The identity check passed (the play went on) and the serving call loaded the provider's module, building none.
    assert results["identity_same"] is True, results
    serving = json.loads(results["serving"].split("GB10_SERVING_CALL ", 1)[1])
    assert serving["built"] is False, serving
    assert provider_so in serving["mapped"], serving
    assert cache_files(cache) == files, "the serving call wrote into the cache"


def test_pitfall_prebuilt_module_for_another_architecture_is_not_taken(images, converged):
    """flashinfer#5238: a prebuilt module without an SM12x image took precedence over the JIT. A provider for sm120a
    alone does not cover GB10's sm121a: the role builds the module, as without any provider."""
    cache = CASES["sm120a"]
    found = stamp(cache)
    assert found.get("kind") != "prebuilt" and "aot" not in found, found
    assert found["steps"] > 0 and found["image_digest"] == images["sm120a"], found
    files = cache_files(cache)
    assert f"{BUILD}/.ninja_log" in files and f"{BUILD}/fused_moe_120.so" in files, files
    calls = in_node("cat", f"{cache}/{CALLS}").stdout.splitlines()
    # One compiler call per unit and the link (the stand-in's "nvcc" is $CC, which links as nvcc does in flashinfer).
    assert len(calls) == int(SIZE["GB10_STANDIN_MOE_UNITS"]) + 1, calls
