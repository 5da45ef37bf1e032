# Copyright: gb10.serving maintainers
# Apache-2.0
"""The sim profile the suite serves: GB10_IT_PROFILE, default sim-replicas (the stand-in, make test's budget);
sim-real runs every test against the real vLLM 0.32 CPU engine (`make test-serving-real`, on a running make sim).

What differs by engine is read from the inventory, as the product reads it: the tool-calling cases and the image
a rolling upgrade moves to (inventories/sim/group_vars/all/serving.yml and sim_image.yml).
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[3]
GROUP_VARS = REPO / "inventories" / "sim" / "group_vars" / "all"
PROFILE = os.environ.get("GB10_IT_PROFILE", "sim-replicas")
# The profile the site served when the suite found it (GB10_IT_CONVERGED_PROFILE, default PROFILE). make test's
# molecule default converges sim-real, the real engine: the modules marked `converged_site` run on it first, then the
# site is moved to PROFILE once for the others (conftest.py).
CONVERGED_PROFILE = os.environ.get("GB10_IT_CONVERGED_PROFILE", PROFILE)
REAL_ENGINE_PROFILES = yaml.safe_load((GROUP_VARS / "serving.yml").read_text())["gb10_sim_real_engine_profiles"]
REAL_ENGINE = PROFILE in REAL_ENGINE_PROFILES


def toolcall_cases(profile):
    """The tool-calling gate's cases for ``profile``'s engine (the real engine's parser needs other cases)."""
    return REPO / "sim" / ("vllm_cpu" if profile in REAL_ENGINE_PROFILES else "standin") / "toolcall_cases.yml"


TOOLCALL_CASES = toolcall_cases(PROFILE)


def engine_restart_s(profile):
    """Seconds a restarted replica of ``profile``'s engine takes to answer /health and generate again, with margin.

    The stand-in starts in seconds; the real vLLM 0.32 CPU engine took about 135 s under the suite's load on 2 cores
    and about 90 s with both nodes at once (sim/vllm_cpu/README.md). Tests that wait for a restart, or size a start
    grace, take this for the profile the site serves now (ServedSim.engine_restart_s).
    """
    return 300 if profile in REAL_ENGINE_PROFILES else 60


ENGINE_RESTART_S = engine_restart_s(PROFILE)


def next_image(images_file, profile=PROFILE):
    """The next release of ``profile``'s serving image as sim/publish_image.sh pushed it: the same layers under a
    new digest."""
    published = yaml.safe_load(Path(images_file).read_text())
    inventory = yaml.safe_load((GROUP_VARS / "sim_image.yml").read_text())
    kind = "real" if profile in REAL_ENGINE_PROFILES else "standin"
    return f"{inventory[f'gb10_sim_{kind}_repository']}@{published[f'gb10_sim_{kind}_next_digest']}"
