# Copyright: gb10.serving maintainers
# Apache-2.0
"""A stand-in ``docker`` client on PATH for role tests run by the real ansible-playbook on local hosts (no engine runs
in the unit tests): it answers what gb10.serving.image_identity and gb10.serving.image_nccl ask, ``image inspect
<name>`` and the probe's ``run``, per node (the play's FAKE_DOCKER_NODE, set by its ``environment``) from
``<state>/<node>.json`` ({"images": {name or "planned": inspect}, "probe": what the probe prints}), "planned"
answering any gb10/ name; every call is logged to ``<state>/calls.log`` as ``<node> <first two words>``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

SCRIPT = r"""#!PYTHON
import json, os, sys
node = os.environ["FAKE_DOCKER_NODE"]
state = json.load(open(os.path.join(os.environ["FAKE_DOCKER_STATE"], node + ".json")))
with open(os.path.join(os.environ["FAKE_DOCKER_STATE"], "calls.log"), "a") as log:
    log.write(node + " " + " ".join(sys.argv[1:3]) + "\n")
if sys.argv[1:3] == ["image", "inspect"]:
    name = sys.argv[3]
    found = state["images"].get(name) or (state["images"].get("planned") if name.startswith("gb10/") else None)
    if found is None:
        print("[]")
        sys.stderr.write("Error response from daemon: No such image: " + name + "\n")
        sys.exit(1)
    print(json.dumps([found]))
elif sys.argv[1] == "run" and state.get("probe"):
    print(json.dumps(state["probe"]))
else:
    sys.stderr.write("no such image\n")
    sys.exit(125)
"""


def install(tmp_path, nodes):
    """Write the client and each node's answers under ``tmp_path``; return (the environment for run_play, the state
    folder)."""
    state = Path(tmp_path) / "docker-state"
    state.mkdir()
    bin_dir = Path(tmp_path) / "bin"
    bin_dir.mkdir()
    docker = bin_dir / "docker"
    docker.write_text(SCRIPT.replace("PYTHON", sys.executable))
    docker.chmod(0o755)
    for node, answers in nodes.items():
        (state / f"{node}.json").write_text(json.dumps(answers))
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_DOCKER_STATE": str(state)}, state


def inspect(image_id, layers=("sha256:" + "3" * 64,)):
    """One ``docker image inspect`` entry with that Id and those layers."""
    return {"Id": image_id, "RootFS": {"Layers": list(layers)}, "Config": {"Labels": {}}}
