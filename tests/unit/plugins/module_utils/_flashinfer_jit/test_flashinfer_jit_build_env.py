# Copyright: gb10.serving maintainers
# Apache-2.0
"""The build-option refusals (plugins/module_utils/_flashinfer_jit/build_env.py)."""

from __future__ import annotations

import pytest

from ansible_collections.gb10.serving.plugins.module_utils._flashinfer_jit.build_env import env_problems, is_debug_build


def test_pitfall_jit_verbose_without_debug_is_a_debug_build():
    """flashinfer 0.6.18 gen_jit_spec: FLASHINFER_JIT_DEBUG unset falls back to FLASHINFER_JIT_VERBOSE."""
    env = {"FLASHINFER_JIT_VERBOSE": "1", "MAX_JOBS": "10"}
    assert is_debug_build(env)
    problems = env_problems(env)
    assert len(problems) == 1
    assert "FLASHINFER_JIT_DEBUG=0" in problems[0]
    assert "-O0" in problems[0]


def test_jit_verbose_with_debug_zero_is_release():
    env = {"FLASHINFER_JIT_VERBOSE": "1", "FLASHINFER_JIT_DEBUG": "0", "MAX_JOBS": "10"}
    assert not is_debug_build(env)
    assert env_problems(env) == []


def test_jit_debug_set_but_empty_wins_over_verbose():
    """The real rule tests `is not None`: an empty FLASHINFER_JIT_DEBUG still overrides VERBOSE=1 (release)."""
    assert not is_debug_build({"FLASHINFER_JIT_VERBOSE": "1", "FLASHINFER_JIT_DEBUG": ""})


def test_jit_debug_one_refused():
    problems = env_problems({"FLASHINFER_JIT_DEBUG": "1"})
    assert len(problems) == 1
    assert "FLASHINFER_JIT_DEBUG=1" in problems[0]


@pytest.mark.parametrize("value", ["auto", "10 ", "-2", "0"])
def test_pitfall_max_jobs_flashinfer_ignores_is_refused(value):
    """cpp_ext._get_num_workers uses MAX_JOBS only when isdigit(); anything else means ninja's default, all cores."""
    problems = env_problems({"MAX_JOBS": value})
    assert len(problems) == 1
    assert "MAX_JOBS" in problems[0]


def test_empty_environment_is_a_release_build():
    assert env_problems({}) == []
    assert not is_debug_build(None)
