# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The maintenance drain's decisions, as pure functions (playbooks/drain.yml applies them).

- server_names(): the servers asked for (``-e drain_servers=a,b`` or a list), in order, each once;
- verdict(): whether draining them is allowed, from every proxy's view of its backend: a name a proxy does not
  front is refused, and so is a drain that would leave no replica up and ready in every proxy unless forced.
  The message names the servers, each proxy's states, and the fix; nothing has changed when it refuses.
"""

from __future__ import annotations

from ansible_collections.gb10.serving.plugins.module_utils import _rolling_upgrade


def server_names(value):
    """The server names of ``value`` (a comma-separated string or a list), stripped, each once, in order.

    Raises ValueError when none is given."""
    if value is None:
        items = []
    elif isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, (list, tuple)):
        items = [str(item) for item in value]
    else:
        raise ValueError(f"drain_servers must be a name, a comma-separated list or a list, not {value!r}")
    names = []
    for item in items:
        name = str(item).strip()
        if name and name not in names:
            names.append(name)
    if not names:
        raise ValueError(
            "pass the servers to drain: -e drain_servers=<name>[,<name>...] (the replicas' inventory hosts, as "
            "playbooks/status.yml names them). Nothing was changed"
        )
    return names


def _states(servers):
    return ", ".join(f"{s['name']} {s['operational']}/{s['admin']}" for s in servers) or "no servers"


def verdict(names, views, force=False):
    """May ``names`` be drained, given ``views`` ({proxy host: the servers haproxy_server read there})?

    Returns {"ok", "msg", "unknown", "already", "serving_before", "serving_after"}: ``serving_*`` are the servers
    up and ready in EVERY proxy (one view: _rolling_upgrade.merge_proxy_views) before and after the drain,
    ``already`` the asked ones every proxy already holds drained or in maintenance. Refused: a name some proxy does
    not front (force does not override it), or no server left serving where one serves now (unless ``force``).
    """
    names = list(names)
    unknown = {}
    for proxy in sorted(views):
        fronted = {server["name"] for server in views[proxy]}
        missing = [name for name in names if name not in fronted]
        if missing:
            unknown[proxy] = missing
    merged = _rolling_upgrade.merge_proxy_views([list(servers) for servers in views.values()])
    serving_before = [s["name"] for s in merged if s["up"] and s["admin"] == "ready"]
    serving_after = [name for name in serving_before if name not in names]
    already = [s["name"] for s in merged if s["name"] in names and s["admin"] != "ready"]
    result = {
        "ok": False,
        "unknown": unknown,
        "already": already,
        "serving_before": serving_before,
        "serving_after": serving_after,
    }
    if not views:
        result["msg"] = (
            "no proxy to drain in: the inventory's gb10_proxy group is empty (drain_proxies). Nothing was changed"
        )
        return result
    if unknown:
        result["msg"] = (
            "; ".join(
                f"{proxy}: backend has no server {', '.join(missing)} (its servers: {_states(views[proxy])})"
                for proxy, missing in unknown.items()
            )
            + ". Give the replicas' inventory names in -e drain_servers (playbooks/status.yml lists them). "
            "Nothing was changed"
        )
        return result
    if serving_before and not serving_after:
        if not force:
            result["msg"] = (
                f"draining {', '.join(names)} would leave no replica serving: up and ready in every proxy now: "
                f"{', '.join(serving_before)} (every server: {_states(merged)}). Bring another replica back first "
                f"(playbooks/status.yml shows why it is out; playbooks/ready.yml puts a held one back), or drain "
                f"anyway with -e drain_force=true (clients then get 503 until a replica is ready). Nothing was changed"
            )
            return result
        result["msg"] = (
            f"forced (drain_force): draining {', '.join(names)} leaves no replica serving "
            f"(every server: {_states(merged)}); clients get 503 until one is ready"
        )
    elif not serving_after:
        result["msg"] = (
            f"no replica serves now (every server: {_states(merged)}): draining {', '.join(names)} changes nothing "
            f"for clients"
        )
    else:
        result["msg"] = f"draining {', '.join(names)}: {', '.join(serving_after)} keep serving" + (
            f" ({', '.join(already)} already held)" if already else ""
        )
    result["ok"] = True
    return result


# A rolling upgrade needs one replica serving while another changes (playbooks/rolling_upgrade.yml).
ROLLING_MINIMUM = 2


def removal_verdict(names, nodes, serving_hosts, proxies, monitoring, topology, force=False):
    """May ``names`` leave the site (playbooks/remove_node.yml)? {"ok", "msg", "remaining"}.

    Refused, force or not: a name that is not a node of the inventory, a node that runs a proxy or the monitoring
    (they must move first), a tensor-parallel profile (one model split over the nodes: a node cannot leave it while
    it serves). Refused unless ``force``: fewer replicas left than a rolling upgrade needs (ROLLING_MINIMUM).
    Nothing has changed when it refuses."""
    names = list(names)
    remaining = [host for host in serving_hosts if host not in names]
    result = {"ok": False, "remaining": remaining}
    unknown = [name for name in names if name not in nodes]
    if unknown:
        result["msg"] = (
            f"{', '.join(unknown)}: not a node of this inventory's gb10_nodes ({', '.join(nodes) or 'none'}). "
            "Nothing was changed"
        )
        return result
    if topology != "replicas":
        result["msg"] = (
            f"the profile is {topology}: one model split over {', '.join(nodes)}, which cannot lose a node while it "
            "serves. Switch to replicas first (playbooks/switch_topology.yml), or change the group in a maintenance "
            "window. Nothing was changed"
        )
        return result
    roles = (("a proxy", proxies), ("the monitoring", monitoring))
    holding = [
        f"{name} runs {' and '.join(what for what, hosts in roles if name in hosts)}"
        for name in names
        if name in proxies or name in monitoring
    ]
    if holding:
        result["msg"] = (
            f"{'; '.join(holding)}: move it to another node first (the inventory's gb10_proxy and gb10_monitoring "
            "groups, then site.yml), then remove this node. Nothing was changed"
        )
        return result
    if len(remaining) < ROLLING_MINIMUM and not force:
        result["msg"] = (
            f"removing {', '.join(names)} leaves {len(remaining)} replica(s) ({', '.join(remaining) or 'none'}) of "
            f"{len(serving_hosts)}: a rolling upgrade needs {ROLLING_MINIMUM}, one serving while another changes. "
            "Add a node first (site.yml with it in gb10_nodes), or remove anyway with -e remove_node_force=true. "
            "Nothing was changed"
        )
        return result
    result["ok"] = True
    result["msg"] = f"removing {', '.join(names)}: {', '.join(remaining) or 'no replica'} keep serving" + (
        f" (forced: fewer than the {ROLLING_MINIMUM} a rolling upgrade needs)"
        if len(remaining) < ROLLING_MINIMUM
        else ""
    )
    return result
