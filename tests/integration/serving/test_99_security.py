# Copyright: gb10.serving maintainers
# Apache-2.0
"""The API closed by default and the secrets never in output (issue 18, items 2 and 5), on the served simulation.

From a third container on the simulation's network (a LAN neighbour, not a node): the proxy's port speaks TLS only
(plain HTTP gets no answer, a client that does not trust the simulation's CA refuses the certificate); through it,
with the simulation's CA, /v1 answers 401 without the key and 200 with it, /health answers without it, /metrics,
/tokenize and the rest are not served on the public port. Then the canaries: the simulation's gb10_api_key and its
canary serving_secrets value (inventories/sim/group_vars/all/security.yml, applied by every converge) must be found
nowhere but the root-only files meant to hold them: not in any node's journal, units, /etc, logs or `ps`, not in the
plan's output, not in the stdout or events (every task's result, its invocation too) of any playbook this session ran
(the converge when the fixture made it, the rolling upgrade, the topology switch, ...: they run before this module,
which is why it is last).

Issue 37 item 2 (the pitfall "secret in docker inspect"): `docker inspect` of every container and image in each node's
own Docker shows no canary (the engine gets them from the root-only secrets.env, mounted read-only and loaded by
gb10-secrets-exec, not from -e/--env-file, which land in Config.Env), and no file on a node's disk holds one but the
root-only files: grep over all of / but /proc, /sys and /dev, /var/lib/docker whole (its containers' configs and
logs, containerd's runtime bundles under /run, every image layer and each running container's merged view; not
slow: measured 2026-12-05 on the stand-in's spark-2, 2.0 GB of overlay2 and 954 MB besides, 15 s while a converge
ran beside it; the real engine's image is 3.1 GB). The time each node's search took is printed. A container created
there with `--env-file secrets.env` (the old way) was found by both: two lines of its `docker inspect` and its
/var/lib/docker/containers/<id>/config.v2.json.
"""

from __future__ import annotations

import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from _api import API_KEY, CANARY
from _third_party import IMAGE

NODES = ("spark-1", "spark-2")
ARGV_OF_EVERY_PROCESS = 'for f in /proc/[0-9]*/cmdline; do tr "\\0" " " < "$f" 2>/dev/null; echo; done'
# What the node's docker group reads: the configuration of every container (Config.Env: -e and --env-file values,
# Args, Mounts) and of every image.
INSPECT_EVERYTHING = (
    'c=$(docker ps -aq); [ -z "$c" ] || docker inspect $c; i=$(docker images -q | sort -u); [ -z "$i" ] || '
    "docker image inspect $i"
)
# grep -rlsF for each argument over the node's whole disk but /proc, /sys and /dev: /var/lib/docker whole too (every
# container's config, log and layers, and each running container's merged view). -r follows no link and reads no
# device, FIFO or socket.
GREP_THE_DISK = r"""
set -u
paths=""
for top in /* /.[!.]*; do
    case "$top" in /proc|/sys|/dev|'/.[!.]*') ;; *) paths="$paths $top" ;; esac
done
# the secrets as patterns on stdin: never in a file on the disk searched, nor split by the shell
printf '%s\n' "$@" | grep -rlsF -f - -- $paths
exit 0
"""
# Only these may hold a secret: vLLM's root-only env file and the key file HAProxy reads (both 0600 root).
ALLOWED = {"/etc/gb10/serving/secrets.env", "/etc/haproxy/gb10-api-keys"}
# Where a node could keep a secret by mistake: configuration, units, logs, the collection's state and scratch.
SEARCHED = ["/etc", "/var/log", "/var/lib/gb10", "/var/lib/haproxy", "/run/gb10", "/usr/local", "/root", "/tmp"]

# Run with python3 in a third container: the simulation's CA comes on stdin (the container has only Debian's trust
# store), every https request but the "untrusted" one verifies the proxy's certificate against it.
HTTP_PROBE = r"""
import http.client, json, ssl, sys, urllib.error, urllib.request
base, key = sys.argv[1], sys.argv[2]
trusted = ssl.create_default_context(cadata=sys.stdin.read())
plain = "http://" + base.split("://", 1)[1]
def ask(path, with_key, method="GET", url=None, context=trusted):
    headers = {"Content-Type": "application/json"}
    if with_key:
        headers["Authorization"] = "Bearer " + key
    data = json.dumps({"model": "tiny-moe", "messages": [{"role": "user", "content": "hi"}],
                       "max_tokens": 4}).encode() if method == "POST" else None
    request = urllib.request.Request((url or base) + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=120, context=context) as answer:
            return answer.status
    except urllib.error.HTTPError as refused:
        return refused.code
    except urllib.error.URLError as failed:
        if isinstance(failed.reason, ssl.SSLCertVerificationError):
            return "certificate verify failed: " + str(failed.reason.verify_message)
        return "failed: " + type(failed.reason).__name__
    except (OSError, http.client.HTTPException) as failed:
        return "failed: " + type(failed).__name__
print(json.dumps({
    "models": ask("/v1/models", False), "models_key": ask("/v1/models", True),
    "chat": ask("/v1/chat/completions", False, "POST"), "chat_key": ask("/v1/chat/completions", True, "POST"),
    "health": ask("/health", False), "metrics": ask("/metrics", False), "metrics_key": ask("/metrics", True),
    "tokenize": ask("/tokenize", True, "POST"), "docs": ask("/docs", True),
    # The same port in plain HTTP, and a client that trusts only the system's store (not the simulation's CA).
    "plain_http": ask("/health", False, url=plain), "plain_http_key": ask("/v1/models", True, url=plain),
    "untrusted": ask("/v1/models", True, context=ssl.create_default_context()),
}))
"""


@pytest.fixture(scope="module")
def third_party(served_sim):
    """What a LAN neighbour sees through the proxy (HTTP_PROBE's answers), from a fresh container on the network."""
    done = subprocess.run(
        [
            *("docker", "run", "--rm", "-i", "--network", served_sim.env["SIM_NETWORK"], IMAGE),
            *("python3", "-c", HTTP_PROBE, served_sim.proxy_url, API_KEY),
        ],
        input=served_sim.proxy_ca.read_text(),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    seen = json.loads(done.stdout.splitlines()[-1])
    print(f"\nthrough the proxy {served_sim.proxy_url} from a third container: {seen}")
    return seen


def test_the_api_through_the_proxy_wants_the_key_from_a_third_container(third_party):
    seen = third_party
    assert seen["models"] == seen["chat"] == 401, seen
    assert seen["models_key"] == seen["chat_key"] == 200, seen
    assert seen["health"] == 200, seen
    assert seen["metrics"] == seen["metrics_key"] == seen["tokenize"] == seen["docs"] == 404, seen


def test_the_public_port_speaks_tls_only_and_its_certificate_verifies_against_the_sim_ca(third_party):
    """README "Security": plain HTTP on the proxy's port gets no answer at all (no status, with the key or without);
    a client that does not trust the simulation's CA refuses the certificate before it sends anything; one that
    trusts it gets 401 without the key and 200 with it."""
    seen = third_party
    assert str(seen["plain_http"]).startswith("failed: "), seen
    assert str(seen["plain_http_key"]).startswith("failed: "), seen
    assert str(seen["untrusted"]).startswith("certificate verify failed: unable to get local issuer certificate"), seen
    assert seen["models"] == 401 and seen["models_key"] == 200, seen


def _node_leaks(sim, node, secrets):
    """Where on ``node`` a secret is found outside ALLOWED: files, the whole journal, `ps`."""
    leaks = []
    for secret in secrets:
        found = sim.exec(node, "grep", "-rlsF", "--", secret, *SEARCHED, check=False).stdout.split()
        leaks += [f"{node}:{path}" for path in found if path not in ALLOWED]
        journal = sim.exec(node, "journalctl", "--no-pager", "-o", "short", check=False, timeout=300).stdout
        # Which process wrote it, the secret masked: enough to find the task or unit that leaks it.
        leaks += [f"{node}: the journal: {line.replace(secret, '***')[:300]}" for line in _lines_with(journal, secret)]
        # What `ps -ef` shows, every process's command line (the node image may lack procps), the engines' too.
        if secret in sim.exec(node, "sh", "-c", ARGV_OF_EVERY_PROCESS, check=False).stdout:
            leaks.append(f"{node}: ps")
    for path in ALLOWED:
        mode = sim.exec(node, "stat", "-c", "%a %U", path, check=False).stdout.strip()
        assert mode in ("", "600 root"), f"{node}:{path} is {mode}, not 600 root"
    return leaks


def _docker_and_disk_leaks(sim, node, secrets):
    """Issue 37 item 2: where ``node``'s docker group or its disk shows a secret (module docstring)."""
    inspected = sim.exec(node, "sh", "-c", INSPECT_EVERYTHING, timeout=120).stdout
    assert '"Name": "/gb10-vllm"' in inspected, f"{node}: no gb10-vllm container to inspect"
    leaks = [
        f"{node}: docker inspect: {line.strip().replace(s, '***')[:200]}"
        for s in secrets
        for line in _lines_with(inspected, s)
    ]
    started = time.monotonic()
    found = sim.exec(node, "sh", "-c", GREP_THE_DISK, "grep-the-disk", *secrets, timeout=900).stdout.split()
    print(f"\n{node}: the disk searched in {time.monotonic() - started:.0f} s, {len(found)} file(s) hold a secret")
    return leaks + [f"{node}:{path} (disk)" for path in found if path not in ALLOWED]


def test_pitfall_secret_in_docker_inspect_no_container_shows_a_secret_and_no_file_holds_one(served_sim):
    """Issue 37 item 2: the canaries reach vLLM (401 without the key, 200 with it: the tests above) from the mounted
    root-only file, and `docker inspect` of any container or image on either node shows neither, nor does any file
    on either node's disk but the root-only ones (module docstring: what is searched)."""
    secrets = (API_KEY, CANARY)
    for node in NODES:
        mounts = json.loads(served_sim.exec(node, "docker", "inspect", "-f", "{{json .Mounts}}", "gb10-vllm").stdout)
        secret_mounts = [m for m in mounts if m["Destination"] == "/run/gb10/secrets.env"]
        assert [(m["Source"], m["RW"]) for m in secret_mounts] == [("/etc/gb10/serving/secrets.env", False)], mounts
    # Both nodes' disks at once: each search is one grep, one core (about 47 s a node with the real engine's image).
    with ThreadPoolExecutor(max_workers=len(NODES)) as pool:
        found = list(pool.map(lambda node: _docker_and_disk_leaks(served_sim, node, secrets), NODES))
    leaks = [leak for node_leaks in found for leak in node_leaks]
    assert leaks == [], "secrets outside the root-only files:\n" + "\n".join(sorted(set(leaks)))


def _lines_with(text, secret, most=3):
    return [line for line in text.splitlines() if secret in line][:most]


def _what_leaked(path, text):
    """The leaking task of an ansible-runner event file (its run, play, task, host and event), else the file's path."""
    try:
        event = json.loads(text) if path.suffix == ".json" else None
    except ValueError:
        event = None
    if not isinstance(event, dict):
        return str(path)
    data = event.get("event_data", {})
    action = data.get("resolved_action") or data.get("task_action")
    where = f"{data.get('play')!r} / {data.get('task')!r} on {data.get('host')}"
    return f"{path.parents[2].name}: {where} ({action}, {event.get('event')})"


# Issue 18 item 5. The first make test run of this check (2026-12-01) found the API key in the output of every
# tool-calling gate and in both nodes' journal: the gate module got the uri results whole, their invocation with
# the Authorization header (gb10.serving.toolcall_answers now gives it the answers only).
def test_the_canary_secrets_are_found_nowhere(served_sim, tmp_path):
    plan_output = tmp_path / "plan.json"
    served_sim.playbook("playbooks/plan.yml", extravars={"plan_output": str(plan_output)})
    secrets = (API_KEY, CANARY)
    served = {node: served_sim.exec(node, "cat", "/etc/gb10/serving/secrets.env").stdout for node in NODES}
    assert all(API_KEY in text and CANARY in text for text in served.values()), "the secrets did not reach vLLM"
    leaks = [leak for node in NODES for leak in _node_leaks(served_sim, node, secrets)]
    assert not any(secret in plan_output.read_text() for secret in secrets), "the plan output holds a secret"
    # The plan states what the collection's clients use: https at the floating address, the simulation's CA.
    api = json.loads(plan_output.read_text())["api"]
    address = served_sim.subnet_base + ".10"
    assert (api["url"], api["ca"]) == (served_sim.proxy_at(address), str(served_sim.proxy_ca)), api
    # Every playbook run of this session: ansible-runner's stdout and every event (each task's whole result). Not
    # env/: what the suite itself passed in (extravars, the environment).
    for path in Path(served_sim.scratch).rglob("*"):
        if path.is_file() and "env" not in path.parts:
            text = path.read_text(errors="replace")
            leaks += [f"ansible output {_what_leaked(path, text)}" for secret in secrets if secret in text]
    print(f"\nplaybook runs searched: {served_sim.runs}")
    assert leaks == [], "secrets outside the root-only files:\n" + "\n".join(sorted(set(leaks)))
