"""inventories/sim/nodes_beyond_two.py against sim/lib/common.sh's own naming and addressing of nodes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "inventories" / "sim" / "nodes_beyond_two.py"


def run(env, *args):
    done = subprocess.run([sys.executable, str(SCRIPT), *args], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_two_nodes_add_nothing():
    assert run({"SIM_NODES": "2"})["gb10_nodes"]["hosts"] == []
    assert run({})["gb10_nodes"]["hosts"] == []


def test_nodes_follow_up_sh_names_and_addresses():
    common = (REPO / "sim" / "lib" / "common.sh").read_text()
    # node_ip() { printf '%s.%d' "$SIM_SUBNET_BASE" "$((10 + $1))"; }  node_name() { printf 'spark-%d' "$1"; }
    assert re.search(r"node_ip\(\) \{ printf '%s\.%d' \"\$SIM_SUBNET_BASE\" \"\$\(\(10 \+ \$1\)\)\"; \}", common)
    assert "node_name() { printf 'spark-%d' \"$1\"; }" in common
    data = run({"SIM_NODES": "4", "SIM_PREFIX": "gb10-it"})
    assert data["gb10_nodes"]["hosts"] == ["spark-3", "spark-4"]
    spark4 = data["_meta"]["hostvars"]["spark-4"]
    assert spark4["ansible_host"] == "gb10-it-spark-4"
    assert spark4["gb10_fabric_address"] == "{{ gb10_sim_subnet_base }}.14"
    assert spark4["gb10_stated_facts"]["interfaces"] == {"eth0": "{{ gb10_sim_subnet_base }}.14/24"}
    assert run({"SIM_NODES": "4"}, "--host", "spark-3")["ansible_host"] == "gb10-sim-spark-3"
