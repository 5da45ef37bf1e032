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
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details:
      - It changes nothing on the node but a throwaway C(docker run --rm) container of each image, the same in check
        mode.
      - In check mode it never pulls (C(docker run --pull never)) - an image the node does not hold yet (not built,
        or a base not pulled) is not probed, and a warning says that the gate runs in the real run.
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
problems:
  description: Every reason the image may not serve; empty when it passed.
  type: list
  elements: str
  returned: always
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils import _serving_image as si


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
    result = dict(
        changed=False,
        passed=not problems,
        moved=[list(m) for m in diff["moved"]],
        missing=[list(m) for m in diff["missing"]],
        added=diff["added"],
        ray_version=(built_probe.get("ray") or {}).get("version"),
        problems=problems,
    )
    if problems:
        module.fail_json(msg="serving image gate: " + "; ".join(problems), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
