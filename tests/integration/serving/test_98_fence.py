# Copyright: gb10.serving maintainers
# Apache-2.0
"""Every port fenced to who needs it (issue 37 items 1 and 5), on the served simulation.

What actually listens is read on each node (`ss -ltn`, every TCP listener not on loopback), not taken from the plan,
so a listener the plan forgot is caught too. From a third container on the simulation's network (a LAN neighbour,
not a node, not the controller the simulation opens a replica's port and Prometheus to on purpose): every such port
of either node is refused (a TCP reset) but the proxy's client port and sshd; a replica's port refuses
`/invocations`, which vLLM serves without the key. From a proxy node the other node's replica still answers, and
the table the node runs is the plan's exposure table (`playbooks/plan.yml` prints it).
"""

from __future__ import annotations

import json

import pytest
from _api import api_headers
from _third_party import connect_from_third_container

# Changes no engine: runs on the site as converged, the real engine in make test (conftest.py), whose listeners and
# /invocations are vLLM's own.
pytestmark = pytest.mark.converged_site

NODES = ("spark-1", "spark-2")
CLIENT_PORT, SSHD = 8080, 22
# Run on a node with its own python3: a replica's /health and /invocations on the other node's fabric address.
FROM_A_NODE = r"""
import json, sys, urllib.error, urllib.request
url, headers = sys.argv[1], json.loads(sys.argv[2])
def ask(path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url + path, data=data, headers={"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status
    except urllib.error.HTTPError as refused:
        return refused.code
    except OSError as failed:
        return "failed: " + type(failed).__name__
print(json.dumps({"health": ask("/health"), "models": ask("/v1/models")}))
"""


def _listening(sim, node):
    """The node's TCP listening ports on an address other than loopback."""
    ports = set()
    for line in sim.exec(node, "ss", "-ltnH").stdout.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        address, _colon, port = fields[3].rpartition(":")
        if address.strip("[]").startswith(("127.", "::1")) or "%lo" in address:
            continue
        ports.add(int(port))
    return sorted(ports)


def test_pitfall_invocations_answers_anyone_who_reaches_a_replica_port(served_sim, tmp_path):
    plan_output = tmp_path / "plan.json"
    served_sim.playbook("playbooks/plan.yml", extravars={"plan_output": str(plan_output)})
    exposure = json.loads(plan_output.read_text())["exposure"]
    problems = []
    for node in NODES:
        address = served_sim.node_ip(node)
        listening = _listening(served_sim, node)
        assert 8000 in listening, (node, listening)  # the replica listens: a refusal below is the fence
        seen = connect_from_third_container(served_sim, address, listening)
        print(f"\nthird container -> {node} {address}: listening {listening}, seen {seen}")
        for port, state in seen.items():
            wanted = "open" if port in (CLIENT_PORT, SSHD) else "refused"
            if state != wanted:
                problems.append(f"{node}:{port} {state}, wanted {wanted}")
        # the node runs the plan's table: every fenced port of its exposure is in it
        table = served_sim.exec(node, "nft", "list", "table", "inet", "gb10_fabric").stdout
        fenced = {p for entry in exposure[node] if entry["fenced"] for p in entry["ports"]}
        problems += [f"{node}: port {p} not in its table" for p in sorted(fenced) if str(p) not in table]
        problems += [
            f"{node}: {p} listens and the plan has no entry for it" for p in listening if _unplanned(p, exposure[node])
        ]
    assert problems == [], problems


def _unplanned(port, entries):
    if port == SSHD:
        return False
    covered = {p for entry in entries for p in entry["ports"]}
    return port not in covered and not any(low <= port <= high for e in entries for low, high in e["ranges"])


def test_a_proxy_node_still_reaches_the_other_nodes_replica(served_sim):
    """The fence lets the proxy nodes in: spark-2 (a proxy) asks spark-1's replica directly, with the key."""
    answers = json.loads(
        served_sim.exec(
            "spark-2",
            "python3",
            "-c",
            FROM_A_NODE,
            served_sim.replica_url("spark-1"),
            json.dumps(api_headers()),
        ).stdout.splitlines()[-1]
    )
    assert answers == {"health": 200, "models": 200}, answers
