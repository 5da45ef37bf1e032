# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Build-option refusals: a silent debug build, a MAX_JOBS that flashinfer ignores (``flashinfer/jit/core.py``
``gen_jit_spec``, ``flashinfer/jit/cpp_ext.py`` ``_get_num_workers``)."""

from __future__ import annotations


def is_debug_build(env):
    """True when flashinfer 0.6.18's gen_jit_spec would compile with -g -O0 --device-debug for this environment."""
    env = env or {}
    debug = env.get("FLASHINFER_JIT_DEBUG")
    chosen = debug if debug is not None else env.get("FLASHINFER_JIT_VERBOSE", "0")
    return str(chosen) == "1"


def env_problems(env):
    """Refusals for a build environment: a silent debug build, a MAX_JOBS that flashinfer ignores."""
    env = env or {}
    problems = []
    if is_debug_build(env):
        if env.get("FLASHINFER_JIT_DEBUG") is None:
            problems.append(
                "FLASHINFER_JIT_VERBOSE=1 without FLASHINFER_JIT_DEBUG=0 is silently a DEBUG build in flashinfer"
                " (gen_jit_spec falls back to FLASHINFER_JIT_VERBOSE when FLASHINFER_JIT_DEBUG is unset): -g -O0"
                " --device-debug -lineinfo, which ran a 128 GB machine out of memory (cicc up to 21 GB, ptxas up to"
                " 33 GB). Set FLASHINFER_JIT_DEBUG=0 beside it, or drop FLASHINFER_JIT_VERBOSE."
            )
        else:
            problems.append(
                "FLASHINFER_JIT_DEBUG=1 asks for a debug build (-g -O0 --device-debug -lineinfo): the module vLLM"
                " loads is the release build (-O3 -DNDEBUG), and the debug build ran a 128 GB machine out of memory."
                " Set FLASHINFER_JIT_DEBUG=0."
            )
    max_jobs_value = env.get("MAX_JOBS")
    if max_jobs_value is not None and not str(max_jobs_value).isdigit():
        problems.append(
            f"MAX_JOBS={max_jobs_value!r} is not all digits: flashinfer ignores it and ninja runs one job per core"
            " plus two, the memory bomb of seed 004 pitfall 7."
        )
    elif max_jobs_value is not None and int(str(max_jobs_value)) == 0:
        problems.append("MAX_JOBS=0 means no limit to ninja (-j 0): give a positive number.")
    return problems
