# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Rules on each node's inputs: its entry in the profile, its snapshot path, its facts, its MAX_JOBS."""

from __future__ import annotations

from .checks import each_node
from .context import CONTAINER_HF_CACHE
from .registry import rule
from .violation import violation

_MAX_JOBS = "seed 004: FlashInfer JIT as a memory bomb (MAX_JOBS)"


@rule("node_override_unknown_host", pitfall="input validation")
def node_override_unknown_host(ctx):
    for host in sorted(set(ctx.profile.get("nodes") or {}) - set(ctx.nodes)):
        yield violation(
            host,
            "node_override_unknown_host",
            host,
            "profile nodes: names {}, which is not in gb10_nodes ({}): fix the name or remove the entry".format(
                host, ", ".join(sorted(ctx.nodes))
            ),
        )


# What context.py found wrong with a node's given snapshot path, and what the plan says about it.
_SNAPSHOT_PROBLEMS = {
    "not_local": "model_weights_snapshot_path on {host} is {given_snapshot!r}, not a local directory: the processor "
    "opens files in the model path directly and fails on a repo id well into startup. Remove it (the plan computes "
    "{computed_snapshot}) or give the snapshot's absolute path",
    "outside_cache": "model_weights_snapshot_path on {host} is {given_snapshot}, outside the HF cache {cache} that "
    "is mounted in the container at " + CONTAINER_HF_CACHE + ": put the snapshot under the cache (expected "
    "{computed_snapshot})",
}


def _snapshot_problem(ctx, rule_name, problem):
    return each_node(
        ctx,
        rule_name,
        lambda figures: figures["snapshot_problem"] == problem,
        lambda figures: figures["given_snapshot"],
        _SNAPSHOT_PROBLEMS[problem],
    )


@rule("model_not_local_path", pitfall="seed 004: repo id vs local snapshot path")
def model_not_local_path(ctx):
    return _snapshot_problem(ctx, "model_not_local_path", "not_local")


@rule("model_snapshot_outside_cache", pitfall="seed 004: no shared filesystem (weights on every node)")
def model_snapshot_outside_cache(ctx):
    return _snapshot_problem(ctx, "model_snapshot_outside_cache", "outside_cache")


@rule("node_facts_missing", pitfall="input validation")
def node_facts_missing(ctx):
    for host in ctx.hosts:
        missing = ctx.per_node[host]["missing"]
        if missing:
            yield violation(
                host,
                "node_facts_missing",
                ", ".join(missing),
                "no {} for {}: state them in gb10_stated_facts or run with -e plan_gather_facts=true".format(
                    ", ".join(missing), host
                ),
            )


def _max_jobs_env(ctx, host):
    """MAX_JOBS as the container gets it (the profile's env on top), an int, or None when it is not one."""
    value = ctx.per_node[host]["env"].get("MAX_JOBS")
    if value is None or not str(value).isdigit() or int(value) < 1:
        return None
    return int(value)


@rule("max_jobs_not_forwarded", pitfall=_MAX_JOBS)
def max_jobs_not_forwarded(ctx):
    if ctx.max_jobs is None:
        return
    for host in ctx.hosts:
        if _max_jobs_env(ctx, host) is None:
            value = ctx.per_node[host]["env"].get("MAX_JOBS")
            yield violation(
                host,
                "max_jobs_not_forwarded",
                value,
                f"MAX_JOBS in {host}'s container environment is {value!r} (the profile env overrides "
                f"max_jobs={ctx.max_jobs}): remove MAX_JOBS from env",
            )


@rule("max_jobs_above_cores", pitfall=_MAX_JOBS)
def max_jobs_above_cores(ctx):
    for host in ctx.hosts:
        jobs, cores = _max_jobs_env(ctx, host), ctx.per_node[host]["facts"].get("cores")
        if jobs is not None and cores and jobs > int(cores):
            yield violation(
                host,
                "max_jobs_above_cores",
                jobs,
                "MAX_JOBS={jobs} on {host} is above its {cores} cores: lower max_jobs to at most {cores}".format(
                    jobs=ctx.per_node[host]["env"]["MAX_JOBS"], host=host, cores=cores
                ),
            )
