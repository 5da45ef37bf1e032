# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The API closed by default (issue 18): the proxy's public frontend wants gb10_api_key unless the inventory opens
it (proxy_anonymous: true), which the plan then prints."""

from __future__ import annotations

from .registry import rule
from .violation import ALL_NODES, violation

LOOPBACK_PREFIXES = ("127.", "::1", "localhost")


def is_loopback(bind):
    return str(bind).strip().strip("[]").startswith(LOOPBACK_PREFIXES)


@rule("api_closed", pitfall="issue 18: an open API on every interface, which nothing could close")
def api_closed(ctx):
    api = ctx.api
    if api is None or api.get("key_set") or api.get("anonymous") or is_loopback(api.get("bind", "*")):
        return
    yield violation(
        ALL_NODES,
        "api_closed",
        f"{api.get('bind', '*')}:{api.get('port', 8080)}",
        f"gb10_api_key is empty and the proxy binds {api.get('bind', '*')}:{api.get('port', 8080)}: anyone who "
        "reaches that port would use the model. Set gb10_api_key (vault it: ansible-vault encrypt_string), or "
        "proxy_anonymous: true to serve without a key on purpose",
    )
