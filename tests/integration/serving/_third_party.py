# Copyright: gb10.serving maintainers
# Apache-2.0
"""A third machine on the simulation's network (issue 18): a throwaway container beside the nodes, not a node, that
tries to connect to their ports. What a LAN neighbour of the GB10 pair sees."""

from __future__ import annotations

import json
import os
import subprocess

# The simulation's base image (sim/lib/common.sh SIM_BASE_IMAGE): Debian with python3, already present.
IMAGE = os.environ.get("SIM_BASE_IMAGE", "gb10-sim-debian:bookworm")
PROBE = r"""
import json, socket, sys
from concurrent.futures import ThreadPoolExecutor
host, ports = sys.argv[1], [int(p) for p in sys.argv[2:]]
def one(port):
    s = socket.socket()
    s.settimeout(3)
    try:
        s.connect((host, port))
        return port, "open"
    except ConnectionRefusedError:
        return port, "refused"
    except socket.timeout:
        return port, "timeout"
    except OSError as exc:
        return port, type(exc).__name__
    finally:
        s.close()
with ThreadPoolExecutor(32) as pool:
    print(json.dumps(dict(pool.map(one, ports))))
"""


def connect_from_third_container(sim, address, ports):
    """``{port: "open" | "refused" | "timeout" | error}`` of TCP connects from a fresh container on the sim network."""
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", sim.env["SIM_NETWORK"], IMAGE, "python3", "-c", PROBE, address]
        + [str(p) for p in ports],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    return {int(port): state for port, state in json.loads(done.stdout.splitlines()[-1]).items()}
