# Copyright: gb10.serving maintainers
# Apache-2.0
"""Property: any plan of a valid profile is deterministic, clean, and its argv passes the pinned catalog."""

from __future__ import annotations

import copy
import json

from _plan_fixtures import catalog_mod, nodes, plan_mod, replicas, tp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CATALOG = catalog_mod.load("0.32.0")

_OPTIONAL = {
    "enable-prefix-caching": st.booleans(),
    "enforce-eager": st.just(True),
    "kv-cache-dtype": st.sampled_from(["auto", "fp8", "fp8_e4m3"]),
    "max-num-batched-tokens": st.sampled_from([2048, 8192, "16k"]),
    "reasoning-parser": st.sampled_from(["glm47", "deepseek_r1"]),
    "trust-remote-code": st.just(True),
    "compilation-config": st.fixed_dictionaries({"cudagraph_mode": st.sampled_from(["FULL", "PIECEWISE"])}),
}


@st.composite
def valid_profiles(draw):
    profile = copy.deepcopy(draw(st.sampled_from([tp(), replicas()])))
    extra = draw(st.dictionaries(st.sampled_from(sorted(_OPTIONAL)), st.none(), max_size=len(_OPTIONAL)))
    for key in extra:
        profile["vllm_options"][key] = draw(_OPTIONAL[key])
    profile["context_length"] = draw(st.sampled_from([4096, 32768, 131072]))
    profile["max_jobs"] = draw(st.integers(min_value=1, max_value=20))
    seqs = draw(st.integers(min_value=1, max_value=64))
    profile["defaults"]["max_num_seqs"] = seqs
    if profile["topology"] == "replicas":
        for host in ("spark-a", "spark-b"):
            share = draw(st.sampled_from([0.78, 0.79, 0.8]))
            profile.setdefault("nodes", {})[host] = {"gpu_memory_utilization": share}
    else:
        # One share for the group, the head's (vLLM applies it to every rank): on the head or in defaults.
        share = draw(st.sampled_from([0.78, 0.8, 0.83]))
        if draw(st.booleans()):
            profile["nodes"] = {"spark-a": {"gpu_memory_utilization": share}}
        else:
            profile["defaults"]["gpu_memory_utilization"] = share
    if profile["topology"] == "replicas" and draw(st.booleans()):
        profile["speculative"] = {"method": "mtp", "num_tokens": draw(st.integers(1, 7)), "drafter_gib": 1.5}
    if draw(st.booleans()):
        profile["env"] = {"HF_HUB_OFFLINE": "1", "VLLM_LOGGING_LEVEL": draw(st.sampled_from(["INFO", "DEBUG"]))}
    return profile


def _plan(profile):
    return plan_mod.plan(
        "p", {"p": profile}, nodes(), fabric_cidr="192.168.200.0/24", ray_head="spark-a", ray_workers=["spark-b"]
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_profiles())
def test_property_plan_deterministic_and_argv_passes_catalog(profile):
    first, second = _plan(profile), _plan(copy.deepcopy(profile))
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    assert first["violations"] == []
    for entry in first["nodes"].values():
        if not entry["argv"]:
            continue
        assert entry["argv"][:2] == ["vllm", "serve"] and entry["argv"][2].startswith("/root/.cache/huggingface/")
        positionals, options, errors = catalog_mod.parse_argv(CATALOG, entry["argv"][2:])
        assert errors == [] and len(positionals) == 1
        assert all(option in CATALOG["options"] for option in options)
        assert options["--served-model-name"] == [profile["model"]["served_model_name"]]
        assert entry["env"]["MAX_JOBS"] == str(profile["max_jobs"])
