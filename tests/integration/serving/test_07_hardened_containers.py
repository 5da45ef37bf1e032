# Copyright: gb10.serving maintainers
# Apache-2.0
"""Serving containers hardened (issue 18 item 6), in the replicas topology the site serves in: every capability
dropped and none added back, no-new-privileges, Docker's init as PID 1, the HF cache mounted read-only, a private
IPC namespace (no --ipc host) with its own /dev/shm, and the serving engine still answering. Reads only; changes
nothing."""

from __future__ import annotations

import json

import pytest

# Changes no engine: runs on the site as converged, the real engine in make test (conftest.py).
pytestmark = pytest.mark.converged_site

NODES = ("spark-1", "spark-2")
HF_CACHE = "/root/.cache/huggingface"
SHM_8G = 8 * 1024**3


def _inspect(sim, node, container):
    return json.loads(sim.exec(node, "docker", "inspect", container).stdout)[0]


def test_replica_containers_run_hardened(served_sim):
    for node in NODES:
        info = _inspect(served_sim, node, "gb10-vllm")
        host = info["HostConfig"]
        print(
            f"\n{node} gb10-vllm: CapDrop={host['CapDrop']} CapAdd={host['CapAdd']} SecurityOpt={host['SecurityOpt']} "
            f"IpcMode={host['IpcMode']} ShmSize={host['ShmSize']}"
        )
        assert [c.removeprefix("CAP_") for c in host["CapDrop"] or []] == ["ALL"], (node, host["CapDrop"])
        assert not host["CapAdd"], (node, host["CapAdd"])
        assert "no-new-privileges" in (host["SecurityOpt"] or []), (node, host["SecurityOpt"])
        assert host["IpcMode"] != "host" and host["ShmSize"] == SHM_8G, (node, host["IpcMode"], host["ShmSize"])
        assert not host["Privileged"], node
        # Docker's init is PID 1, the engine its child: a replica stopped as it starts stops on SIGTERM
        # (roles/serving's README)
        assert host["Init"] is True, (node, host.get("Init"))
        hf = [m for m in info["Mounts"] if m["Destination"] == HF_CACHE]
        assert len(hf) == 1 and hf[0]["RW"] is False, (node, info["Mounts"])
        # the kernel's view from inside: the effective capability set is empty and writes to the cache fail
        status = served_sim.exec(
            node, "docker", "exec", "gb10-vllm", "grep", "-E", "^(CapEff|NoNewPrivs)", "/proc/1/status"
        )
        fields = dict(line.split(":\t", 1) for line in status.stdout.strip().splitlines())
        assert int(fields["CapEff"], 16) == 0 and fields["NoNewPrivs"].strip() == "1", (node, fields)
        write = served_sim.exec(node, "docker", "exec", "gb10-vllm", "touch", f"{HF_CACHE}/.gb10-probe", check=False)
        assert write.returncode != 0 and "Read-only file system" in write.stderr, (node, write.stderr)
        assert served_sim.served(node), f"{node}: the hardened replica does not answer /health"
