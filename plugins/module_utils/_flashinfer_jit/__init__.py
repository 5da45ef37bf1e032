# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""FlashInfer JIT prebuild: compile-job sizing, build-option refusals, build-log reading, cache layout and stamp.

Pure functions over plain data, one concern a file (listed below; callers import the file they need), tested in
tests/unit/plugins/module_utils/_flashinfer_jit/ (one test file a module). Every rule is taken from the source of the
pinned flashinfer-python release (0.6.18) and from seed 004 (pitfall 2, pitfall 7, "The CUTLASS saga"):

- cache layout (``flashinfer/jit/env.py``): ``$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/<version>/<archs>/``
  with ``cached_ops/<module>/{build.ninja,*.o,<module>.so}`` and ``generated/``; ``<archs>`` joins the sorted
  target archs, each ``<major><minor><suffix>`` (``90a`` for sm90, ``121a`` for GB10's sm121, ``120f`` for sm120).
- module name (``flashinfer/fused_moe/core.py`` ``get_cutlass_fused_moe_module``): the backend is
  ``major * 10 + minor``; 120 and 121 both build ``fused_moe_120``, 100/107/110 build ``fused_moe_100``.
- debug build (``flashinfer/jit/core.py`` ``gen_jit_spec``): ``FLASHINFER_JIT_DEBUG`` when set, else
  ``FLASHINFER_JIT_VERBOSE``, equal to ``"1"`` makes ``-g -O0 --device-debug -lineinfo``.
- ``MAX_JOBS`` (``flashinfer/jit/cpp_ext.py`` ``_get_num_workers``): used as ``ninja -j`` only when it is all
  digits; anything else is silently ignored and ninja runs one job per core plus two.

The files:

- ``errors.py``: ``FlashinferJitError``, an input that cannot describe a real node or build;
- ``job_sizing.py``: ``max_jobs`` and the per-job peak RSS measured on each CPU architecture;
- ``build_env.py``: the build-option refusals (a silent debug build, a MAX_JOBS flashinfer ignores);
- ``cache_layout.py``: the module vLLM asks for and where flashinfer keeps it (arch folder, module name, paths);
- ``stamps.py``: the prebuild stamp and whether the cache holds the module a node wants (``cache_state``);
- ``build_log.py``: reading a build log, an OOM kill told from a compile error;
- ``build_identity.py``: the build's own identity (build.ninja, .ninja_log, prebuilt modules) and what was rebuilt;
- ``build_watch.py``: a running build's progress and when it is stalled;
- ``cache_files.py``: a cache file's text and sha256;
- ``sharing.py``: built once per cluster, which node builds, which receive, and the manifest sent.
"""
