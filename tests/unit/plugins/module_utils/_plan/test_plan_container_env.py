# Copyright: gb10.serving maintainers
# Apache-2.0
"""Issue 41 item 2: the plan hands each node its engine containers' whole environment (container_env), the cache paths
the containers mount stated once (context.CONTAINER_PATHS, the plan's container_paths): roles/serving's engine.env
renders it as is, the rolling upgrade's drift check compares with it, roles/flashinfer_jit builds into the same
workspace."""

from __future__ import annotations

from _plan_fixtures import plan_mod, replicas, run, tp

PATHS = {
    "hf_cache": "/root/.cache/huggingface",
    "hf_modules_cache": "/root/.cache/hf-modules",
    "flashinfer_workspace_base": "/root/.cache/flashinfer-workspace",
    "vllm_cache_root": "/root/.cache/vllm-cache",
}


def test_the_plan_states_the_containers_paths_once():
    planned = run(replicas())
    assert planned["container_paths"] == PATHS == plan_mod.context.CONTAINER_PATHS
    assert PATHS["hf_cache"] == plan_mod.CONTAINER_HF_CACHE
    # the HF modules cache lies outside the read-only HF cache mount (transformers writes remote code there)
    assert not PATHS["hf_modules_cache"].startswith(PATHS["hf_cache"] + "/")


def test_every_node_gets_its_whole_container_environment():
    for planned in (run(replicas(env={"VLLM_LOGGING_LEVEL": "DEBUG"})), run(tp())):
        paths = planned["container_paths"]
        for host, entry in planned["nodes"].items():
            env = entry["container_env"]
            assert env == {
                "HF_MODULES_CACHE": paths["hf_modules_cache"],
                **entry["env"],
                "FLASHINFER_WORKSPACE_BASE": paths["flashinfer_workspace_base"],
                "VLLM_CACHE_ROOT": paths["vllm_cache_root"],
            }, host
            assert set(entry["env"]) < set(env)
            assert all(isinstance(value, str) for value in env.values())
    assert (
        run(replicas(env={"VLLM_LOGGING_LEVEL": "DEBUG"}))["nodes"]["spark-a"]["container_env"]["VLLM_LOGGING_LEVEL"]
        == "DEBUG"
    )


def test_a_profile_moves_the_modules_cache_but_never_the_mounted_caches():
    env = {"HF_MODULES_CACHE": "/tmp/modules", "VLLM_CACHE_ROOT": "/tmp/elsewhere", "FLASHINFER_WORKSPACE_BASE": "/x"}
    container_env = run(replicas(env=env))["nodes"]["spark-a"]["container_env"]
    assert container_env["HF_MODULES_CACHE"] == "/tmp/modules"
    assert container_env["VLLM_CACHE_ROOT"] == PATHS["vllm_cache_root"]
    assert container_env["FLASHINFER_WORKSPACE_BASE"] == PATHS["flashinfer_workspace_base"]


def test_the_printed_plan_shows_the_whole_container_environment():
    planned = run(replicas(env={"VLLM_LOGGING_LEVEL": "DEBUG"}))
    text = plan_mod.format_plan(planned)
    block = text.split("== spark-a", 1)[1].split("\n== ", 1)[0]
    env_lines = block.split("\nenv:\n", 1)[1].split("\nmemory:", 1)[0].splitlines()
    assert env_lines == [f"  {key}={value}" for key, value in planned["nodes"]["spark-a"]["container_env"].items()]
    assert "  VLLM_CACHE_ROOT=/root/.cache/vllm-cache" in env_lines
    assert "  VLLM_LOGGING_LEVEL=DEBUG" in env_lines
