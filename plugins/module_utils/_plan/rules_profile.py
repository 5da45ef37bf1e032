# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Rules of the profile stage: there must be a chosen profile before there is anything to plan."""

from __future__ import annotations

from .registry import rule
from .violation import ALL_NODES, violation

_NO_DEFAULT = "seed 004: a mandatory PROFILE with no default"


@rule("profile_missing", pitfall=_NO_DEFAULT, stage="profile")
def profile_missing(ctx):
    if not ctx.profile_name:
        yield violation(
            ALL_NODES,
            "profile_missing",
            None,
            "no serving profile chosen: pass -e serving_profile=<name>; this inventory has: %s"
            % (", ".join(sorted(ctx.profiles)) or "none"),
        )


@rule("profile_unknown", pitfall=_NO_DEFAULT, stage="profile")
def profile_unknown(ctx):
    if ctx.profile_name and ctx.profile_name not in ctx.profiles:
        yield violation(
            ALL_NODES,
            "profile_unknown",
            ctx.profile_name,
            "serving profile {!r} is not in this inventory's serving_profiles; choose one of: {}".format(
                ctx.profile_name, ", ".join(sorted(ctx.profiles)) or "none"
            ),
        )
