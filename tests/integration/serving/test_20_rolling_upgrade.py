# Copyright: gb10.serving maintainers
# Apache-2.0
"""playbooks/rolling_upgrade.yml under a steady load through the proxy (issue 6, DESIGN section 6).

Every test sends plain and streaming chat requests through the proxy for the whole run and asserts 0 failed requests
and 0 5xx; it prints the requests each replica served over time, read from each replica's own /metrics (seed 002:
never through the proxy).

The three upgrades chain, so that one rolling upgrade back to the original profile ends them instead of one after
each: both nodes to the next model revision and the next serving image (a new digest: the FlashInfer module is built
once, on the first drained node, and received by the other, issue 17); then, on top of it, a wrong tool-call parser
that spark-1 fails (it stays drained, spark-2 keeps the revision); then, from there, a target whose replica is
killed on spark-1 (it stays drained again). Between the last two the tool-calling gate refuses the replica left with
the wrong parser. The last one puts the site back on the original profile and image at once (the FlashInfer module
for that image, the serving apply, an explicit ready); the first that fails restores it by a rolling upgrade of both
nodes (spark-1 from drained). Either waits until both replicas are serving and READY.

The chain edits the profile the site serves, and ends on it. In make test that is the suite's profile, the
stand-in, for time: on the real engine its 9 tests took 14 to 17 minutes by hand, and make test with them there
took 53:59 on a fresh clone (README, "Which engine each test of the suite serves").
"""

from __future__ import annotations

import copy
import json
import subprocess
import threading
import time
import urllib.request
from contextlib import contextmanager

import pytest
import yaml
from _api import API_KEY
from _profile import REAL_ENGINE_PROFILES, toolcall_cases
from _profile import next_image as _next_image

from ansible_collections.gb10.serving.plugins.module_utils import _bench, _loadgen

PLAYBOOK = "playbooks/rolling_upgrade.yml"
NODES = ("spark-1", "spark-2")
# The local hub serves two revisions of the sim model (sim/hub): the second is the upgrade target.
NEXT_REVISION = "9b1e4f7a2c6d8e0f3a5b7c9d1e2f4a6b8c0d2e4f"
# The chain's --max-num-seqs (the profiles' is 4): the first upgrade's proxy run must carry it to every proxy's
# per-server maxconn (seed 002), and the restore carries the profile's back.
TARGET_SEQS = 6
# A --tool-call-parser that starts with the sim model's tokenizer and does not read its hermes calls. vLLM 0.32's dots
# sets supports_required_and_named False, so vLLM sends even a named call through dots' own format instead of the JSON
# schema (vllm/parser/abstract_parser.py): the real engine's random model, unguided, writes no call at all; the
# stand-in writes its hermes call, which comes back as text. (llama3_json, which vLLM refuses at start for this
# tokenizer, is refused before the drain: test_upgrade_to_a_parser_whose_tokens_the_tokenizer_lacks_is_refused.)
WRONG_PARSER = "dots"
FAILED = "runner_on_failed"


def wrong_parser_smoke(sim):
    """How the smoke test names the WRONG_PARSER's miss on the engine the site serves (see WRONG_PARSER)."""
    return "no tool call in the answer" if sim.profile in REAL_ENGINE_PROFILES else "came back as text in content"


def profiles(sim):
    return yaml.safe_load((sim.inventory / "group_vars" / "all" / "serving_profiles.yml").read_text())[
        "serving_profiles"
    ]


def target(sim, change):
    """Extra vars that make the inventory's profile the site serves into the target: change(profile) edits it."""
    edited = copy.deepcopy(profiles(sim))
    change(edited[sim.profile])
    return {"serving_profiles": edited}


class PerReplica:
    """Samples each replica's own vllm:request_success counter every ``every`` seconds (a restart resets it)."""

    def __init__(self, sim, every=2.0):
        self.sim, self.every = sim, every
        self.rows, self._stop = [], threading.Event()
        self._last = dict.fromkeys(NODES, 0.0)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _served(self, node):
        try:
            with urllib.request.urlopen(f"{self.sim.replica_url(node)}/metrics", timeout=3) as answer:
                return _bench.parse_metrics(answer.read().decode()).get("vllm:request_success_total", 0.0)
        except (OSError, ValueError):
            return None

    def _run(self):
        started = time.monotonic()
        while not self._stop.is_set():
            row = {"t": round(time.monotonic() - started, 1)}
            for node in NODES:
                now = self._served(node)
                if now is None:
                    row[node] = "down"
                    continue
                before = self._last[node]
                row[node] = int(now - before if now >= before else now)
                self._last[node] = now
            self.rows.append(row)
            self._stop.wait(self.every)

    def __enter__(self):
        for node in NODES:
            self._last[node] = self._served(node) or 0.0
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=10)

    def table(self, bucket=10.0):
        """[(from-s, {node: "served" or "served (down)"})] per ``bucket`` seconds; down: a read found no replica."""
        buckets = {}
        for row in self.rows:
            slot = buckets.setdefault(int(row["t"] // bucket * bucket), {node: [0, False] for node in NODES})
            for node in NODES:
                if row[node] == "down":
                    slot[node][1] = True
                else:
                    slot[node][0] += row[node]
        return [
            (key, {node: f"{count}{' (down)' if down else ''}" for node, (count, down) in buckets[key].items()})
            for key in sorted(buckets)
        ]


@contextmanager
def steady_load(sim, label):
    """Plain and streaming requests through the proxy for the whole block; asserts none failed and none was 5xx."""
    load = _loadgen.Steady(
        sim.proxy_url,
        "tiny-moe",
        concurrency=3,
        max_tokens=8,
        timeout=120,
        pause_s=0.1,
        api_key=API_KEY,
        ca_path=str(sim.proxy_ca),
    )
    with PerReplica(sim) as watch:
        load.start()
        try:
            yield load
        finally:
            records = load.stop()
    failed = _loadgen.failures(records)
    print(
        f"\n[{label}] {len(records)} requests through the proxy "
        f"({sum(1 for r in records if r['stream'])} streaming), {len(failed)} failed or 5xx"
    )
    print(f"[{label}] requests served per replica (own /metrics), per 10 s:")
    print("    from-s  " + "  ".join(f"{n:>14}" for n in NODES))
    for start, slot in watch.table():
        print(f"    {start:>6}  " + "  ".join(f"{slot[n]:>14}" for n in NODES))
    assert records, "the load generator sent nothing"
    assert not failed, f"{len(failed)} request(s) failed or answered 5xx: {failed[:5]}"


def restore(sim):
    """A rolling upgrade back to the inventory's own profile; both replicas serving and READY."""
    sim.playbook(PLAYBOOK)
    sim.wait_all_ready()


def fast_restore(sim):
    """Back to the inventory's profile on both nodes at once and every held server ready: the inventory's image gated
    again with its FlashInfer module (the chain moved the site to the next one), the serving apply and a ready,
    without a rolling upgrade's per-node checks (no load runs here; make test's budget)."""
    sim.playbook("tests/integration/serving/serving_apply.yml", {"serving_apply_image": True})
    sim.playbook("playbooks/ready.yml", {"ready_servers": "all"})
    sim.wait_all_ready()


@contextmanager
def restored_on_failure(sim):
    """Leave the site where the test took it (the next test starts there); restore it only when the test fails."""
    try:
        yield
    except BaseException:
        restore(sim)
        raise


def next_image(sim):
    """The next release of the image the site serves as sim/publish_image.sh pushed it: the same layers under a new
    digest."""
    return _next_image(sim.env["GB10_SIM_IMAGES"], sim.profile)


def upgraded(sim):
    """The edit to the next model revision on the next serving image with TARGET_SEQS sequences a replica, which every
    upgrade of the chain makes."""
    image = next_image(sim)

    def change(profile):
        profile["model"].update(revision=NEXT_REVISION)
        profile["image"].update(ref=image)
        profile["defaults"]["max_num_seqs"] = TARGET_SEQS
        for node in (profile.get("nodes") or {}).values():
            node.pop("max_num_seqs", None)

    return change


def running_base(sim, node):
    """The base image of the replica's container: the serving image is the gated Ray layer on top of it, labelled
    with its base by roles/serving_image."""
    label = '{{index .Config.Labels "org.gb10.serving.base"}}'
    return sim.exec(node, "docker", "inspect", "-f", label, "gb10-vllm").stdout.strip()


def container_id(sim, node):
    return sim.exec(node, "docker", "inspect", "-f", "{{.Id}}", "gb10-vllm", check=False).stdout.strip()


def output(runner):
    """The run's output with whitespace collapsed: the YAML callback folds long messages over lines."""
    return " ".join(runner.stdout.read().split())


def test_rolling_upgrade_of_both_nodes_under_load(served_sim, tmp_path):
    sim = served_sim
    image = next_image(sim)
    report = tmp_path / "report.json"
    extravars = {**target(sim, upgraded(sim)), "rolling_upgrade_report": str(report)}
    before = {node: container_id(sim, node) for node in NODES}
    assert all(running_base(sim, node) != image for node in NODES), "the site already serves the next image"
    with restored_on_failure(sim):
        with steady_load(sim, "upgrade to the next model revision and serving image"):
            runner = sim.playbook(PLAYBOOK, extravars=extravars)
        text = output(runner)
        for node in NODES:
            argv = sim.running_argv(node)
            assert any(NEXT_REVISION in word for word in argv), f"{node} does not serve the target: {argv}"
            assert running_base(sim, node) == image, f"{node} does not run the target image"
            assert container_id(sim, node) != before[node], f"{node} was not restarted"
        # Issue 17 item 3: the new image's module is compiled once for the cluster, on the first drained node; the
        # second takes it from there over the fabric while the first serves.
        flashinfer = {node: figures["flashinfer"] for node, figures in json.loads(report.read_text()).items()}
        print(f"\nFlashInfer module per node: {flashinfer}")
        assert flashinfer["spark-1"]["action"] == "built", flashinfer
        assert (flashinfer["spark-2"]["action"], flashinfer["spark-2"]["source"]) == ("received", "spark-1"), flashinfer
        assert sim.all_ready()
        for node in NODES:
            assert f"{node} upgraded and ready" in text, f"no figures for {node}"
        # Issue 17 item 2: each node's restarted replica loaded the prebuilt fused-MoE module, ninja with nothing to do.
        rebuilt = {
            e["event_data"]["host"]: e["event_data"]["res"]
            for e in runner.events
            if e.get("event") == "runner_on_ok"
            and e["event_data"].get("task") == "Prove that the start rebuilt no prebuilt FlashInfer module"
        }
        assert sorted(rebuilt) == sorted(NODES), rebuilt
        for res in rebuilt.values():
            assert (res["rebuilt"], len(res["modules"])) == (0, 1), res["message"]
        # The target moves --max-num-seqs from the profile's 4 to TARGET_SEQS: the upgrade's proxy run carries it to
        # every proxy's per-server maxconn.
        for node in NODES:
            assert sim.running_seqs(node) == TARGET_SEQS, f"{node}: {sim.running_argv(node)}"
        for proxy in sim.proxies():
            stats = sim.proxy_stats(proxy)
            assert {node: stats[node]["slim"] for node in NODES} == dict.fromkeys(NODES, str(TARGET_SEQS)), (
                proxy,
                stats,
            )
        print(
            "\n"
            + "\n".join(part.split(" TASK ")[0] for part in text.split("msg: ")[1:] if "upgraded and ready" in part)
        )


def test_serving_role_refuses_a_gated_image_of_another_base(served_sim):
    """The previous test left both nodes gated and serving on the next image: the serving role alone, asked for the
    inventory's own image, refuses before it changes anything instead of serving the gated next image."""
    sim = served_sim
    before = {node: container_id(sim, node) for node in NODES}
    runner = sim.playbook("tests/integration/serving/serving_apply.yml", check=False)
    text = output(runner)
    assert runner.rc != 0, "the serving role served the gated image of another base"
    failed = {
        e["event_data"]["host"]: e["event_data"]["task"] for e in runner.events if e.get("event") == "runner_on_failed"
    }
    assert failed == dict.fromkeys(NODES, "Refuse a gated image built on another base than the plan's image"), failed
    assert "but the plan serves" in text and "Nothing was changed" in text
    assert {node: container_id(sim, node) for node in NODES} == before, "a replica was restarted"
    assert sim.all_ready()


def test_upgrade_to_a_parser_whose_tokens_the_tokenizer_lacks_is_refused(served_sim):
    """vLLM 0.32 loads the model and then refuses --tool-call-parser llama3_json for the sim tokenizer (no
    <|python_tag|>): the upgrade refuses it on every node when the target's weights are checked, before a drain."""
    sim = served_sim
    upgrade = upgraded(sim)

    def llama3_json(profile):
        upgrade(profile)
        profile["vllm_options"].update({"tool-call-parser": "llama3_json"})

    before = {node: container_id(sim, node) for node in NODES}
    with restored_on_failure(sim):
        runner = sim.playbook(PLAYBOOK, extravars=target(sim, llama3_json), check=False)
        text = output(runner)
        assert runner.rc != 0, "the upgrade to a parser the tokenizer cannot start went through"
        failed = {e["event_data"]["host"]: e["event_data"]["task"] for e in runner.events if e.get("event") == FAILED}
        assert failed == dict.fromkeys(NODES, "Refuse parsers whose tokens the model's tokenizer lacks"), failed
        assert "--tool-call-parser llama3_json needs '<|python_tag|>'" in text and "Nothing was started" in text
        assert {node: container_id(sim, node) for node in NODES} == before, "a replica was restarted"
        assert sim.backend_states() == dict.fromkeys(NODES, (2, 0)), "a node was drained"
        assert sim.all_ready()


def test_node_failing_its_smoke_test_stays_drained(served_sim):
    # From the previous test's site: both nodes on the next revision.
    sim = served_sim

    upgrade = upgraded(sim)

    def wrong_parser(profile):
        upgrade(profile)
        profile["vllm_options"].update({"tool-call-parser": WRONG_PARSER})

    extravars = target(sim, wrong_parser)
    with restored_on_failure(sim):
        with steady_load(sim, "wrong tool-call parser"):
            runner = sim.playbook(PLAYBOOK, extravars=extravars, check=False)
            states = sim.backend_states()
            serving_second = sim.served("spark-2") and sim.chat("still there?")["choices"]
        text = output(runner)
        assert runner.rc != 0, "the upgrade to a wrong tool-call parser went through"
        assert "tool-call smoke test" in text and wrong_parser_smoke(sim) in text
        assert "spark-1 stays DRAINED" in text and "resume with the same command" in text
        assert states["spark-1"][1] != 0, f"spark-1 is not drained: {states}"
        assert states["spark-2"] == (2, 0), f"spark-2 does not serve: {states}"
        assert serving_second
        assert "hermes" in sim.running_argv("spark-2"), "spark-2 was touched after spark-1 failed"


def test_gate_refuses_a_replica_whose_parser_cannot_read_its_tool_calls(served_sim):
    """The previous test left spark-1 drained and serving with the WRONG_PARSER, which does not read the model's
    format: every case that expects a call fails, the gate refuses it against the running spark-2 (hermes), which
    passes every case."""
    sim = served_sim
    calling = {case["id"] for case in yaml.safe_load(toolcall_cases(sim.profile).read_text()) if case["expect_calls"]}
    with restored_on_failure(sim):
        assert WRONG_PARSER in sim.running_argv("spark-1") and "hermes" in sim.running_argv("spark-2")
        runner, refusal = sim.toolcall_gate("spark-1", "spark-2", check=False)
        print(f"\nspark-1 with tool-call-parser {WRONG_PARSER}: {refusal['msg']}")
        assert runner.rc != 0
        failing = {result["id"] for result in refusal["candidate"]["failing"]}
        assert calling and calling <= failing and refusal["running"]["score"] == 1.0, refusal


def test_node_whose_replica_dies_mid_upgrade_stays_drained(served_sim):
    # From the previous test's site: spark-1 drained with the wrong parser, spark-2 serving the next revision.
    sim = served_sim

    upgrade = upgraded(sim)

    def without_prefix_caching(profile):
        upgrade(profile)
        profile["vllm_options"].pop("enable-prefix-caching")

    extravars = target(sim, without_prefix_caching)
    first = NODES[0]
    original = container_id(sim, first)
    killed = threading.Event()

    def kill_the_new_replica():
        # Once the first node is drained and its upgraded replica's container exists, kill it (as the OOM killer
        # or a crash would): systemd's Restart=on-failure brings it back, which the upgrade must not trust.
        # The preflight of the target on every node comes first and takes minutes on a loaded machine.
        deadline = time.monotonic() + 3600
        while time.monotonic() < deadline and not killed.is_set():
            try:
                drained = sim.backend_states().get(first, (0, 0))[1] != 0
                now = container_id(sim, first) if drained else ""
            except (OSError, subprocess.SubprocessError):
                drained, now = False, ""
            if now and now != original:
                sim.exec(first, "docker", "kill", "gb10-vllm", check=False)
                killed.set()
                return
            time.sleep(0.2)

    killer = threading.Thread(target=kill_the_new_replica, daemon=True)
    try:
        with steady_load(sim, "replica killed mid-upgrade"):
            killer.start()
            runner = sim.playbook(PLAYBOOK, extravars=extravars, check=False)
            killer.join(timeout=5)
            states = sim.backend_states()
        text = output(runner)
        assert killed.is_set(), "the new replica was never seen to kill"
        assert runner.rc != 0, "the upgrade went on after its replica died"
        assert f"{first} stays DRAINED" in text
        assert states[first][1] != 0, f"{first} is not drained: {states}"
        assert states["spark-2"] == (2, 0), f"spark-2 does not serve: {states}"
        assert "--enable-prefix-caching" in sim.running_argv("spark-2"), "spark-2 was touched"
    finally:
        killed.set()
        fast_restore(sim)


@pytest.mark.parametrize("profile", ["sim-tp"])
def test_tensor_parallel_is_refused_with_the_switch_playbook_named(served_sim, profile):
    runner = served_sim.playbook(PLAYBOOK, extravars={"serving_profile": profile}, check=False)
    text = output(runner)
    assert runner.rc != 0
    assert "playbooks/switch_topology.yml" in text and "Nothing was changed" in text
    served_sim.wait_all_ready(timeout=30)


def test_unknown_restart_method_is_refused_before_any_change(served_sim):
    runner = served_sim.playbook(PLAYBOOK, extravars={"upgrade_node_restart": "powercycle"}, check=False)
    text = output(runner)
    assert runner.rc != 0
    assert 'spark-1: upgrade_node_restart is "powercycle" with' in text and "Nothing was changed" in text
    served_sim.wait_all_ready(timeout=30)


def test_pitfall_reload_forgets_a_drained_replica(served_sim):
    # A replica left drained by a failed upgrade must stay drained when HAProxy reloads (site.yml, an operator):
    # the reload saves the runtime state for the new process (roles/proxy, server-state-file).
    sim = served_sim
    try:
        assert sim.proxy_admin("set server vllm/spark-2 state drain").strip() == ""
        sim.exec("spark-1", "systemctl", "reload", "haproxy.service")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sim.backend_states().get("spark-2") is None:
            time.sleep(0.5)
        time.sleep(2)
        states = sim.backend_states()
        print(f"\nafter the reload: {states}")
        assert states["spark-2"][1] & 0x08, f"the reload put the drained spark-2 back in service: {states}"
        assert states["spark-1"] == (2, 0)
    finally:
        sim.proxy_admin("set server vllm/spark-2 state ready")
        sim.wait_all_ready()
