# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/serving/files/gb10-serving-watchdog: when it restarts its unit, and when it must not; its probe (/health and
one real completion) against a real HTTP server on localhost."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from fake_engine import fake_engine
from serving_render import ROLE, render_watchdog

SCRIPT = ROLE / "files" / "gb10-serving-watchdog"
_loader = importlib.machinery.SourceFileLoader("gb10_serving_watchdog", str(SCRIPT))
_spec = importlib.util.spec_from_loader("gb10_serving_watchdog", _loader)
watchdog = importlib.util.module_from_spec(_spec)
_loader.exec_module(watchdog)


def step(failures, probe_ok=False, enabled=True, active=True, active_for=5000.0):
    return watchdog.decide(failures, probe_ok, enabled, active, active_for, grace_s=1200, threshold=3)


def test_restarts_only_after_n_failures_in_a_row():
    failures, actions = 0, []
    for _probe in range(3):
        action, failures = step(failures)
        actions.append(action)
    assert actions == ["failing", "failing", "restart"] and failures == 0
    assert step(2, probe_ok=True) == ("healthy", 0)


def test_pitfall_stopped_watchdog_restarts_conflicting_unit():
    # Seed 002: the old topology's watchdog would restart its unit, whose Conflicts= stops the new topology.
    # A disabled unit (the other topology is applied) or a stopped one is never touched, whatever the probes say.
    assert step(2, enabled=False) == ("skip-disabled", 0)
    assert step(2, active=False) == ("skip-inactive", 0)


def test_no_restart_inside_the_start_grace():
    # A replica loads its model for minutes; failed probes then are not counted.
    assert step(2, active_for=30.0) == ("starting", 0)


def test_main_never_calls_restart_for_a_disabled_unit(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(watchdog, "_unit_state", lambda unit: (False, False, 0.0))
    monkeypatch.setattr(watchdog, "_probe", lambda *args: calls.append(("probe", *args)) or (False, "probed"))
    monkeypatch.setattr(watchdog, "_systemctl", lambda *args: calls.append(args))
    state = tmp_path / "failures"
    state.write_text("2\n")
    args = ["--unit", "gb10-vllm-tp.service", "--url", "http://10.0.0.1:8000/health", "--state", str(state)]
    assert watchdog.main(args) == 0
    assert calls == [] and state.read_text() == "0\n"


def test_pitfall_frozen_engine_is_killed_before_its_restart(tmp_path, monkeypatch):
    # A frozen engine keeps SIGTERM pending: the unit's graceful stop would wait out serving_stop_timeout (120 s)
    # before the restart. Its container is killed first, then the unit restarted.
    calls = []
    monkeypatch.setattr(watchdog, "_unit_state", lambda unit: (True, True, 3600.0))
    monkeypatch.setattr(watchdog, "_probe", lambda *args: (False, "completion: no answer within 5.0 s"))
    monkeypatch.setattr(watchdog, "_docker", lambda *args: calls.append(("docker", *args)) or _done(0))
    monkeypatch.setattr(watchdog, "_systemctl", lambda *args: calls.append(("systemctl", *args)) or _done(0))
    state = tmp_path / "failures"
    state.write_text("2\n")
    argv = ["--unit", "gb10-vllm.service", "--url", "http://10.0.0.1:8000/health", "--state", str(state)]
    assert watchdog.main([*argv, "--container", "gb10-vllm"]) == 0
    assert calls == [
        ("docker", "kill", "--signal", "SIGKILL", "gb10-vllm"),
        ("systemctl", "restart", "--no-block", "gb10-vllm.service"),
    ]
    calls.clear()
    state.write_text("2\n")
    assert watchdog.main(argv) == 0  # no container named: the unit's own stop
    assert calls == [("systemctl", "restart", "--no-block", "gb10-vllm.service")]


def _done(returncode):
    return subprocess.CompletedProcess([], returncode, "", "")


@pytest.fixture
def engine():
    with fake_engine() as answers:
        yield answers


def probe(base, key="", timeout=1.0):
    return watchdog._probe(f"{base}/health", f"{base}/v1/completions", "tiny-moe", key, timeout, f"{base}/metrics")


def test_probe_healthy_when_health_and_one_completion_answer(engine):
    base, state = engine
    ok, reason = probe(base)
    assert ok, reason
    assert reason.startswith("health 200 in ") and ", completion 200 in " in reason
    [(path, request, authorization)] = state["posts"]
    assert path == "/v1/completions" and authorization is None
    assert request == {"model": "tiny-moe", "prompt": watchdog.PROMPT, "max_tokens": 1}


def test_pitfall_health_200_while_the_engine_is_frozen(engine):
    # Issue 19: vLLM's API server answers /health 200 for minutes after its engine core froze or died; only a
    # generation shows it. The completion hangs past the probe's timeout: not healthy, and the line says which check.
    base, state = engine
    state["completion"] = "hang"
    started = time.monotonic()
    ok, reason = probe(base, timeout=0.5)
    took = time.monotonic() - started
    assert not ok and took < 2.0
    assert "health 200" in reason and f"completion {base}/v1/completions: no answer within " in reason
    assert watchdog.decide(2, ok, True, True, 5000.0, 1200, 3) == ("restart", 0)


def test_pitfall_busy_engine_is_not_restarted_for_a_probe_that_waited_for_a_slot(engine):
    # With every --max-num-seqs slot taken (the proxy's maxconn fills them) the probe waits as long as a running
    # request: a timed-out completion while vLLM's generated-token counter moves is a busy engine, not a frozen one.
    base, state = engine
    state["completion"] = "busy"
    ok, reason = probe(base, timeout=0.5)
    assert ok and "waited" in reason and "7 tokens generated meanwhile" in reason, reason
    state["completion"] = "hang"  # frozen: the counter stands still
    ok, reason = probe(base, timeout=0.5)
    assert not ok and "no answer within" in reason, reason


def test_generated_tokens_sums_the_counter_over_its_label_sets():
    text = (
        "# HELP vllm:generation_tokens_total Number of generation tokens processed.\n"
        "# TYPE vllm:generation_tokens_total counter\n"
        'vllm:generation_tokens_total{engine="0",model_name="m"} 120.0\n'
        'vllm:generation_tokens_total{engine="1",model_name="m {x}"} 3.0\n'
        'vllm:generation_tokens_created{engine="0",model_name="m"} 1.7e9\n'
        "vllm:generation_tokens_totally_other 5\n"
    )
    assert watchdog.generated_tokens(text) == 123.0
    assert watchdog.generated_tokens("vllm:generation_tokens_total 4\n") == 4.0
    assert watchdog.generated_tokens("") is None and watchdog.generated_tokens(None) is None


def test_probe_sends_the_key_from_the_key_file_and_is_refused_without_it(engine, tmp_path):
    base, state = engine
    state["key"] = "s3cret-key"
    ok, reason = probe(base)
    assert not ok and "completion" in reason and "HTTP 401" in reason
    key_file = tmp_path / "secrets.env"
    key_file.write_text("# managed\nGB10_CANARY=x\nVLLM_API_KEY=s3cret-key\n")
    key_file.chmod(0o600)
    key = watchdog.read_key(key_file)
    ok, reason = probe(base, key=key)
    assert ok, reason
    assert state["posts"][-1][2] == "Bearer s3cret-key" and "s3cret-key" not in reason


def test_probe_not_healthy_when_the_completion_fails(engine):
    base, state = engine
    state["completion"] = "500"
    ok, reason = probe(base)
    assert not ok and "health 200" in reason and "HTTP 500" in reason
    state["completion"] = "empty"
    ok, reason = probe(base)
    assert not ok and "without a choice" in reason


def test_probe_names_a_failing_health_and_skips_the_completion(engine):
    base, state = engine
    state["health"] = 503
    ok, reason = probe(base)
    assert not ok and reason.startswith(f"health {base}/health: HTTP 503 after ") and state["posts"] == []


def test_main_reads_the_key_file_and_prints_no_key(engine, tmp_path, monkeypatch, capsys):
    base, state = engine
    state["key"] = "s3cret-key"
    monkeypatch.setattr(watchdog, "_unit_state", lambda unit: (True, True, 5000.0))
    monkeypatch.setattr(watchdog, "_systemctl", lambda *args: pytest.fail(f"systemctl {args}"))
    key_file = tmp_path / "secrets.env"
    key_file.write_text("VLLM_API_KEY=s3cret-key\n")
    state_file = tmp_path / "failures"
    args = ["--unit", "gb10-vllm.service", "--url", f"{base}/health", "--completions-url", f"{base}/v1/completions"]
    args += ["--model", "tiny-moe", "--key-file", str(key_file), "--state", str(state_file), "--timeout", "2"]
    assert watchdog.main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("gb10-vllm.service: healthy (0/3 failures in a row; health 200 in ") and "s3cret" not in out
    state["completion"] = "500"
    assert watchdog.main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("gb10-vllm.service: failing (1/3 failures in a row; health 200 in ") and "HTTP 500" in out


REPLICA_WATCHDOG = {
    "name": "replica",
    "unit": "gb10-vllm.service",
    "container": "gb10-vllm",
    "probe": "engine",
    "ray": None,
    "restart": ["gb10-vllm.service"],
    "kill": ["gb10-vllm"],
}


def test_watchdog_unit_passes_the_key_file_path_never_the_key():
    watchdog = REPLICA_WATCHDOG
    text = render_watchdog("service", watchdog, gb10_api_key="s3cret-key")
    assert text.startswith("# managed") and "s3cret" not in text
    exec_start = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    argv = shlex.split(exec_start[len("ExecStart=") :])
    opts = dict(zip(argv[1::2], argv[2::2], strict=False))
    assert opts["--key-file"] == "/etc/gb10/serving/secrets.env" and opts["--model"] == "tiny-moe"
    assert opts["--completions-url"] == "http://192.168.200.11:8000/v1/completions"
    assert opts["--container"] == "gb10-vllm" and opts["--metrics-url"] == "http://192.168.200.11:8000/metrics"
    variables = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    assert variables["_serving_model_name"] == "{{ _serving_plan.model.served_model_name }}"


def _warm_args(base, state_file, marker):
    args = ["--unit", "gb10-vllm.service", "--url", f"{base}/health", "--completions-url", f"{base}/v1/completions"]
    args += ["--model", "tiny-moe", "--state", str(state_file), "--timeout", "2", "--marker", str(marker)]
    args += ["--warmup-url", f"{base}/v1/chat/completions", "--warmup-max-tokens", "16", "--warmup-timeout", "5"]
    args += ["--warmup-prompt", "Say hello."]
    return args


def test_pitfall_cold_replica_back_in_the_proxy_after_a_restart_is_warmed_first(engine, tmp_path, monkeypatch, capsys):
    # Seed 004 (the first request compiles kernels) on the paths no Ansible run follows: after this watchdog's
    # restart, systemd's Restart=on-failure or a reboot the unit removed its marker, and the warm agent holds the
    # replica out of the proxy. The first healthy probe sends the warm-up request, then writes the marker; once.
    base, state = engine
    monkeypatch.setattr(watchdog, "_unit_state", lambda unit: (True, True, 30.0))
    monkeypatch.setattr(watchdog, "_systemctl", lambda *args: pytest.fail(f"systemctl {args}"))
    marker = tmp_path / "gb10-warm" / "replica"
    args = _warm_args(base, tmp_path / "failures", marker)
    assert watchdog.main(args) == 0
    assert marker.read_text() == "warm\n" and oct(marker.stat().st_mode & 0o777) == "0o644"
    assert [path for path, _body, _auth in state["posts"]] == ["/v1/completions", "/v1/chat/completions"]
    warmup = {"model": "tiny-moe", "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 16}
    assert state["posts"][1][1] == warmup
    out = capsys.readouterr().out
    assert "gb10-vllm.service: warmed (warm-up 200 in " in out and str(marker) in out
    assert watchdog.main(args) == 0
    assert [path for path, _body, _auth in state["posts"]][2:] == ["/v1/completions"], "warmed twice"


def test_no_warm_up_for_an_engine_that_fails_its_probe_and_none_marked_when_the_warm_up_fails(
    engine, tmp_path, monkeypatch, capsys
):
    base, state = engine
    monkeypatch.setattr(watchdog, "_unit_state", lambda unit: (True, True, 5000.0))
    monkeypatch.setattr(watchdog, "_systemctl", lambda *args: pytest.fail(f"systemctl {args}"))
    marker = tmp_path / "replica"
    args = _warm_args(base, tmp_path / "failures", marker)
    state["completion"] = "500"
    assert watchdog.main(args) == 0
    assert not marker.exists() and [p for p, _b, _a in state["posts"]] == ["/v1/completions"]
    state["completion"] = "ok"
    monkeypatch.setattr(watchdog, "warm_up", lambda *args: (False, "warm-up http://x: HTTP 503 after 0.1 s"))
    assert watchdog.main(args) == 0
    assert not marker.exists()
    assert "gb10-vllm.service: not warmed (warm-up http://x: HTTP 503" in capsys.readouterr().out


def test_warm_up_sends_the_key_and_names_a_refusal(engine):
    base, state = engine
    state["key"] = "s3cret-key"
    ok, said = watchdog.warm_up(f"{base}/v1/chat/completions", "tiny-moe", "", 16, 2.0)
    assert not ok and said.endswith("HTTP 401 after " + said.rsplit("after ", 1)[1])
    ok, said = watchdog.warm_up(f"{base}/v1/chat/completions", "tiny-moe", "s3cret-key", 16, 2.0)
    assert ok and said.startswith("warm-up 200 in ")
    assert state["posts"][-1][2] == "Bearer s3cret-key"


# One read of the Ray cluster as RAY_READ prints it: the head (spark-1) and the worker (spark-2) alive.
HEAD, WORKER = "192.168.200.11", "192.168.200.12"


def _report(own="aa", nodes=(("aa", HEAD, True), ("bb", WORKER, True))):
    return {"self": own, "nodes": [{"id": i, "address": a, "alive": alive} for i, a, alive in nodes]}


def test_ray_verdict_the_whole_group_alive_on_the_head_and_the_own_raylet_on_a_worker():
    ok, reason = watchdog.ray_verdict(_report(), [HEAD, WORKER])
    assert ok and reason == "ray: 2 alive node(s), the group's 2 ranks among them"
    ok, reason = watchdog.ray_verdict(_report(own="bb"), [])
    assert ok and reason == "ray: 2 alive node(s)"


def test_pitfall_tp_rank_died_health_200_on_the_head():
    # vLLM's /health stays 200 after a Ray worker died (vllm-project/vllm#16259): the head's watchdog reads the
    # group in Ray. The dead rank's node is there, not alive (Ray keeps dead nodes in its table): the line names it.
    lost = _report(nodes=(("aa", HEAD, True), ("bb", WORKER, False)))
    ok, reason = watchdog.ray_verdict(lost, [HEAD, WORKER])
    assert not ok and reason == f"ray: 1/2 ranks of the group alive, none at {WORKER}"
    assert watchdog.decide(2, ok, True, True, 5000.0, 1200, 3) == ("restart", 0)
    # the worker came back as a new node (a restarted raylet is a new node to Ray): the group is whole again
    back = _report(nodes=(("aa", HEAD, True), ("bb", WORKER, False), ("cc", WORKER, True)))
    assert watchdog.ray_verdict(back, [HEAD, WORKER])[0]


def test_pitfall_zombie_worker_raylet_after_head_restart():
    # The head's GCS restarted (the group restart, or the head crashed): Ray keeps no cluster state across it
    # without GCS fault tolerance, and a worker raylet that outlived it does not reliably exit (ray-project/ray
    # #33955, #33854): the new cluster does not list it as alive. Its own watchdog restarts it.
    ok, reason = watchdog.ray_verdict(_report(own="bb", nodes=(("cc", HEAD, True),)), [])
    assert not ok and reason == "ray: this node's raylet bb is not an alive node of the cluster"


def test_ray_report_is_the_last_json_line_and_none_without_one():
    text = "2026-12-02 WARNING worker.py -- something\n" + __import__("json").dumps(_report()) + "\n"
    assert watchdog.ray_report(text) == _report()
    assert watchdog.ray_report("ConnectionError: could not connect\n") is None
    assert watchdog.ray_report('{"nodes": 3}\n') is None and watchdog.ray_report(None) is None


def test_ray_check_reads_inside_the_ray_container_and_a_failed_read_is_a_failure(monkeypatch):
    runs = []

    def fake_run(argv, **kwargs):
        runs.append((argv, kwargs["timeout"]))
        return subprocess.CompletedProcess(argv, 1, "", "RuntimeError: Failed to connect to GCS at 10.0.0.1:6379\n")

    monkeypatch.setattr(watchdog.subprocess, "run", fake_run)
    ok, reason = watchdog._ray_check("gb10-ray-worker", "10.0.0.1:6379", [], 20.0)
    [(argv, limit)] = runs
    assert argv[:6] == ["docker", "exec", "gb10-ray-worker", "timeout", "20", "python3"]
    assert argv[-1] == "10.0.0.1:6379" and argv[-2] == watchdog.RAY_READ and limit == 30.0
    assert not ok and "no node table from gb10-ray-worker via 10.0.0.1:6379" in reason and "Failed to connect" in reason


def test_ray_read_is_valid_python_that_uses_only_rays_public_api():
    compile(watchdog.RAY_READ, "RAY_READ", "exec")
    assert "ray._" not in watchdog.RAY_READ and "ray.nodes()" in watchdog.RAY_READ


def test_raylet_verdict_alive_only_on_a_200_success():
    assert watchdog.raylet_verdict(200, b"success", "", 0.01) == (True, "raylet alive in the GCS (0.0 s)")
    ok, reason = watchdog.raylet_verdict(503, b"Local Raylet failed", "", 0.02)
    assert not ok and reason == "raylet: HTTP 503 (Local Raylet failed) after 0.0 s"
    ok, reason = watchdog.raylet_verdict(None, b"", "no answer ([Errno 111] Connection refused)", 0.0)
    assert not ok and reason == "raylet: no answer ([Errno 111] Connection refused) after 0.0 s"


def test_pitfall_zombie_worker_raylet_answers_503_and_is_restarted(engine, tmp_path, monkeypatch, capsys):
    # After the head's GCS restarted, a worker raylet it does not know can stay up (ray-project/ray#33955): Ray's
    # agent then answers /api/local_raylet_healthz 503. The worker's watchdog restarts its own Ray unit.
    base, state = engine
    state["raylet"] = (503, b"RPC error: WrongClusterID: Perhaps the client is accessing GCS after it restarted.")
    calls = []
    monkeypatch.setattr(watchdog, "_unit_state", lambda unit: (True, True, 600.0))
    monkeypatch.setattr(watchdog, "_probe", lambda *args: pytest.fail("a Ray worker has no engine to probe"))
    monkeypatch.setattr(watchdog, "_ray_check", lambda *args: pytest.fail("a worker runs no Ray driver"))
    monkeypatch.setattr(watchdog, "_docker", lambda *args: calls.append(("docker", *args)) or _done(0))
    monkeypatch.setattr(watchdog, "_systemctl", lambda *args: calls.append(("systemctl", *args)) or _done(0))
    argv = ["--unit", "gb10-ray-worker.service", "--state", str(tmp_path / "failures"), "--grace", "60"]
    argv += ["--container", "gb10-ray-worker", "--raylet-healthz", f"{base}/api/local_raylet_healthz"]
    for _tick in range(3):
        assert watchdog.main(argv) == 0
    assert calls == [
        ("docker", "kill", "--signal", "SIGKILL", "gb10-ray-worker"),
        ("systemctl", "restart", "--no-block", "gb10-ray-worker.service"),
    ]
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("gb10-ray-worker.service: failing (1/3 failures in a row; raylet: HTTP 503 (RPC error: ")
    assert "WrongClusterID" in out[0]
    state["raylet"] = (200, b"success")
    calls.clear()
    assert watchdog.main(argv) == 0 and calls == []


def test_pitfall_tp_group_restarted_as_a_group(tmp_path, monkeypatch, capsys):
    # Issue 19 item 4: a lost rank (the engine still answers /health, its completion does not) restarts the head's
    # Ray with the engine: the engine's container killed, then the head's, then both units restarted in one
    # systemctl call (After= orders the jobs). The workers' own watchdogs bring them back into the new cluster.
    calls = []
    monkeypatch.setattr(watchdog, "_unit_state", lambda unit: (True, True, 3600.0))
    lost_rank = "health 200 in 0.0 s; completion http://10.0.0.1:8000/v1/completions: no answer within 5.0 s"
    monkeypatch.setattr(watchdog, "_probe", lambda *args: (False, lost_rank))
    lost = _report(nodes=(("aa", HEAD, True), ("bb", WORKER, False)))
    monkeypatch.setattr(watchdog, "_ray_check", lambda c, a, peers, t: watchdog.ray_verdict(lost, peers))
    monkeypatch.setattr(watchdog, "_docker", lambda *args: calls.append(("docker", *args)) or _done(0))
    monkeypatch.setattr(watchdog, "_systemctl", lambda *args: calls.append(("systemctl", *args)) or _done(0))
    state = tmp_path / "failures"
    state.write_text("2\n")
    argv = ["--unit", "gb10-vllm-tp.service", "--url", "http://10.0.0.1:8000/health", "--state", str(state)]
    argv += ["--container", "gb10-vllm-tp,gb10-ray-head", "--restart", "gb10-ray-head.service,gb10-vllm-tp.service"]
    argv += ["--ray-container", "gb10-ray-head", "--ray-address", f"{HEAD}:6379", "--ray-peers", f"{HEAD},{WORKER}"]
    assert watchdog.main(argv) == 0
    assert calls == [
        ("docker", "kill", "--signal", "SIGKILL", "gb10-vllm-tp"),
        ("docker", "kill", "--signal", "SIGKILL", "gb10-ray-head"),
        ("systemctl", "restart", "--no-block", "gb10-ray-head.service", "gb10-vllm-tp.service"),
    ]
    out = capsys.readouterr().out
    assert out.startswith(f"gb10-vllm-tp.service: restart (0/3 failures in a row; {lost_rank}; ray: 1/2 ranks")
    assert f"ray: 1/2 ranks of the group alive, none at {WORKER}" in out


def test_the_head_reads_ray_only_after_a_failed_probe(tmp_path, monkeypatch):
    # A generated token needs every rank; each read is a Ray driver, a finished job the GCS keeps for the cluster's
    # lifetime (ray-project/ray#65692).
    reads = []
    monkeypatch.setattr(watchdog, "_unit_state", lambda unit: (True, True, 3600.0))
    monkeypatch.setattr(watchdog, "_probe", lambda *args: (True, "health 200 in 0.0 s, completion 200 in 0.1 s"))
    monkeypatch.setattr(watchdog, "_ray_check", lambda *args: reads.append(args) or (True, "ray"))
    argv = ["--unit", "gb10-vllm-tp.service", "--url", "http://10.0.0.1:8000/health"]
    argv += ["--state", str(tmp_path / "failures"), "--ray-container", "gb10-ray-head"]
    assert watchdog.main(argv) == 0 and reads == []


def _watchdog_argv(plan, host):
    [watchdog] = [u["watchdog"] for u in plan["nodes"][host]["units"] if u["watchdog"]]
    text = render_watchdog("service", watchdog, _serving_plan=plan)
    line = next(line for line in text.splitlines() if line.startswith("ExecStart="))
    argv = shlex.split(line[len("ExecStart=") :])
    return dict(zip(argv[1::2], argv[2::2], strict=False))


def test_tp_watchdog_units_name_the_plans_group_restart_and_ray_check():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "_plan"))
    from _plan_fixtures import shipped_plan

    # the Ray launcher's units (sim-tp is vLLM's own multi-node launch, with no Ray to check)
    plan = shipped_plan("sim", "sim-tp-ray")
    assert plan["violations"] == [] and plan["launcher"] == "ray"
    head, worker = _watchdog_argv(plan, "spark-1"), _watchdog_argv(plan, "spark-2")
    gcs = plan["ray"]["gcs_address"]
    assert head["--restart"] == "gb10-ray-head.service,gb10-vllm-tp.service"
    assert head["--container"] == "gb10-vllm-tp,gb10-ray-head" and head["--ray-container"] == "gb10-ray-head"
    assert "--raylet-healthz" not in head
    assert head["--ray-peers"] == ",".join(plan["ray"]["peers"]) and head["--ray-address"] == gcs
    assert head["--grace"] == "1200" and "--completions-url" in head
    assert worker["--restart"] == "gb10-ray-worker.service" and worker["--container"] == "gb10-ray-worker"
    assert worker["--raylet-healthz"] == "http://127.0.0.1:52365/api/local_raylet_healthz" and worker["--grace"] == "60"
    assert not {"--url", "--key-file", "--ray-container", "--ray-peers"} & set(worker)


def test_mp_head_watchdog_probes_its_engine_and_restarts_it_alone_with_no_ray_check():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "_plan"))
    from _plan_fixtures import shipped_plan

    # vLLM's own multi-node launch (sim-tp): no Ray on the head, its one engine unit restarted
    plan = shipped_plan("sim", "sim-tp")
    assert plan["violations"] == [] and plan["launcher"] == "mp"
    head = _watchdog_argv(plan, "spark-1")
    assert head["--unit"] == head["--restart"] == "gb10-vllm-mp.service" and head["--container"] == "gb10-vllm-mp"
    assert "--completions-url" in head and head["--grace"] == "1200"
    assert not {"--ray-container", "--ray-peers", "--ray-address", "--raylet-healthz"} & set(head)


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "watchdog"


def _rank_tables():
    # /proc/net/tcp and tcp6 of a simulated node running a headless rank of the real vLLM 0.32 with its group serving
    # (sim-tp): the rank's connection to its head's store is dual-stack, ::ffff:10.77.0.12 -> ::ffff:10.77.0.11:29501.
    return [(FIXTURES / f"rank_serving.proc_net_{name}").read_text() for name in ("tcp", "tcp6")]


def test_pitfall_headless_rank_hangs_after_its_head_died_is_seen_by_its_store_connection():
    # Measured on vLLM 0.32: a headless rank whose head died hangs on with no connection left to the head; a
    # restarted head waits for ranks that never rejoin. The rank's watchdog reads the node's TCP table.
    tables = _rank_tables()
    assert watchdog.established_to(tables, "10.77.0.11", 29501)
    assert not watchdog.established_to(tables, "10.77.0.11", 29502)  # another port
    assert not watchdog.established_to(tables, "10.77.0.13", 29501)  # another head
    assert not watchdog.established_to(tables[:1], "10.77.0.11", 29501)  # the IPv4 table alone holds no such line
    # listening sockets (state 0A) to the same address do not count: only ESTABLISHED (01)
    listening = tables[1].replace(" 01 ", " 0A ")
    assert not watchdog.established_to([tables[0], listening], "10.77.0.11", 29501)
    assert not watchdog.established_to(["garbage\n 0: zz:zz zz:zz 01"], "10.77.0.11", 29501)


def test_mp_rank_watchdog_holds_the_heads_store_and_judges_the_heads_health_after_the_engine_grace():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "_plan"))
    from _plan_fixtures import shipped_plan

    plan = shipped_plan("sim", "sim-tp")
    argv = _watchdog_argv(plan, "spark-2")
    assert argv["--master"] == "10.77.0.11:29501"
    assert argv["--url"] == "http://10.77.0.11:8000/health"
    assert argv["--url-grace"] == "1200" and argv["--grace"] == "60"
    assert argv["--restart"] == "gb10-vllm-mp-rank.service" and argv["--container"] == "gb10-vllm-mp-rank"
    for absent in ("--completions-url", "--key-file", "--raylet-healthz", "--ray-container", "--marker"):
        assert absent not in argv, absent


def test_mp_rank_without_its_heads_store_is_restarted_and_a_loading_head_is_not_counted(tmp_path, monkeypatch):
    restarted = []
    monkeypatch.setattr(watchdog, "_unit_state", lambda unit: (True, True, 300.0))
    monkeypatch.setattr(watchdog, "_restart", lambda unit, units, containers, admit=None: restarted.append(units) or 0)
    monkeypatch.setattr(watchdog, "_probe", lambda *a, **k: (False, "health: no answer"))
    connected = {"ok": True}
    monkeypatch.setattr(watchdog, "_master_check", lambda master: (connected["ok"], "store"))
    argv = ["--unit", "gb10-vllm-mp-rank.service", "--state", str(tmp_path / "f"), "--grace", "60"]
    argv += ["--master", "10.77.0.11:29501", "--url", "http://10.77.0.11:8000/health", "--url-grace", "1200"]
    # within the head's load time a down head is not counted while the store connection holds
    for _run in range(4):
        assert watchdog.main(argv) == 0
    assert restarted == []
    connected["ok"] = False  # the head died: the connection is gone
    for _run in range(3):
        watchdog.main(argv)
    assert restarted == [["gb10-vllm-mp-rank.service"]]


# --- issue 39 item 2: the watchdog's restart admitted by MemAvailable, like every other start of an engine ---------

# spark-1's memory table in sim-replicas' plan (0.45 x 121.69 GiB, 8g /dev/shm, other work 6 GiB, margin 5 GiB)
NEED = ["--mem-need-gib", "73.76", "--mem-need-parts", "budget=54.76,shm=8.0,other=6.0,margin=5.0"]
TABLE = {"start_need_gib": 73.76, "budget_gib": 54.76, "shm_gib": 8.0, "other_work_reserve_gib": 6.0, "margin_gib": 5.0}
PYTHON3, DOCKERD = (
    {"pid": 4100, "name": "python3", "rss_mib": 40960.0},
    {"pid": 812, "name": "dockerd", "rss_mib": 96.0},
)


def _reader(readings):
    """The watchdog's node reading, _admission.judged() of /proc/meminfo, over each of ``readings`` (MiB) in turn."""

    def read(stated):
        return watchdog._admission.judged(_meminfo(next(readings)), stated)

    return read


def _meminfo(available_mib):
    """/proc/meminfo's lines the admission reads, MemAvailable ``available_mib`` (None: a kernel without it)."""
    lines = ["MemTotal:       24683792 kB", "MemFree:         1048576 kB", "Cached:          2097152 kB"]
    if available_mib is not None:
        lines.append(f"MemAvailable:   {int(available_mib * 1024)} kB")
    return "\n".join(lines) + "\n"


def _admission_main(tmp_path, monkeypatch, available_mib, probe_ok=False, extra=()):
    calls = []
    monkeypatch.setattr(watchdog, "_unit_state", lambda unit: (True, True, 3600.0))
    monkeypatch.setattr(watchdog, "_probe", lambda *args: (probe_ok, "completion: no answer within 5.0 s"))
    monkeypatch.setattr(watchdog, "_docker", lambda *args: calls.append(("docker", *args)) or _done(0))
    monkeypatch.setattr(watchdog, "_systemctl", lambda *args: calls.append(("systemctl", *args)) or _done(0))
    monkeypatch.setattr(watchdog, "_processes", lambda: [PYTHON3, DOCKERD])
    monkeypatch.setattr(watchdog.socket, "gethostname", lambda: "spark-1")
    readings = iter(available_mib)
    monkeypatch.setattr(watchdog, "_meminfo_text", lambda: _meminfo(next(readings)))
    monkeypatch.setattr(watchdog.time, "sleep", lambda seconds: None)
    state = tmp_path / "failures"
    state.write_text("2\n")
    argv = ["--unit", "gb10-vllm.service", "--url", "http://10.0.0.1:8000/health", "--state", str(state)]
    argv += ["--container", "gb10-vllm", *NEED, "--mem-wait", "0", *extra]
    return watchdog.main(argv), calls, tmp_path / watchdog.REFUSED


def test_pitfall_memory_admitted_by_free_not_available_watchdog_restart_refused(tmp_path, monkeypatch, capsys):
    """The watchdog's restart is a start of the engine too: with the node's MemAvailable short of the plan's need
    once the engine's container is killed, it is refused with the numbers and the units stopped (systemd's own
    Restart= would start the killed unit again), never restarted. The words are the collection's one admission rule
    (plugins/module_utils/_admission.py), as the serving role's start says them."""
    rc, calls, refused = _admission_main(tmp_path, monkeypatch, [60000.0])
    assert rc == 0
    assert calls == [
        ("docker", "kill", "--signal", "SIGKILL", "gb10-vllm"),
        ("systemctl", "stop", "--no-block", "gb10-vllm.service"),
    ]
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if "restart refused" in line)
    assert line.startswith("gb10-vllm.service: restart refused (issue 39): spark-1: engine start refused, 15.17 GiB")
    assert (
        "MemAvailable 58.59 GiB (measured; MemFree 1.00 GiB, page cache 2.00 GiB) against the plan's need 73.76 GiB "
        "= vLLM budget 54.76 GiB + /dev/shm 8.00 GiB + other work 6.00 GiB + margin 5.00 GiB" in line
    )
    assert "What holds the memory now: python3 (pid 4100) 40.00 GiB, dockerd (pid 812) 0.09 GiB" in line
    assert "gb10-vllm.service stopped; the watchdog starts none of them" in line
    assert "restarting" not in out
    # kept beside the failure count until the unit is healthy again
    assert refused.read_text().strip() == line
    _admission_main(tmp_path, monkeypatch, [], probe_ok=True)
    assert not refused.exists()


def test_pitfall_memory_admitted_by_free_not_available_watchdog_waits_for_the_killed_engines_memory(
    tmp_path, monkeypatch, capsys
):
    # the killed engine's memory comes back over a few readings: admitted once MemAvailable reaches the need
    readings, slept = iter([30000.0, 80000.0]), []
    monkeypatch.setattr(watchdog.time, "sleep", slept.append)
    monkeypatch.setattr(watchdog, "_processes", lambda: [PYTHON3])
    verdict = watchdog.admit_restart("spark-1", TABLE, "", 5.0, read=_reader(readings))
    assert verdict["admitted"] and verdict["message"].startswith(
        "spark-1: engine start admitted: MemAvailable 78.12 GiB (measured; "
    )
    assert slept == [0.5]
    # never admitted: refused on the last reading once the wait is over, naming what holds the memory
    verdict = watchdog.admit_restart("spark-1", TABLE, "", 0.0, read=_reader(iter([30000.0])))
    assert not verdict["admitted"] and "MemAvailable 29.30 GiB (measured; " in verdict["message"]
    assert "python3 (pid 4100) 40.00 GiB" in verdict["message"]


def test_watchdog_restart_admitted_restarts_with_the_numbers(tmp_path, monkeypatch, capsys):
    rc, calls, refused = _admission_main(tmp_path, monkeypatch, [80000.0])
    assert calls[-1] == ("systemctl", "restart", "--no-block", "gb10-vllm.service") and rc == 0
    assert (
        "restart admitted: spark-1: engine start admitted: MemAvailable 78.12 GiB (measured; MemFree 1.00 GiB, "
        "page cache 2.00 GiB) against the plan's need 73.76 GiB" in capsys.readouterr().out
    )
    assert not refused.exists()


def test_watchdog_admission_reads_the_stated_figure_and_no_memavailable_admits_nothing(tmp_path, monkeypatch, capsys):
    verdict = watchdog.admit_restart("spark-1", TABLE, "121900", 0.0, read=_reader(iter([None])))
    assert (
        verdict["admitted"]
        and "MemAvailable 119.04 GiB (stated in the inventory, measured ? GiB; " in (verdict["message"])
    )
    monkeypatch.setattr(watchdog, "_processes", lambda: [])
    verdict = watchdog.admit_restart("spark-1", TABLE, "", 0.0, read=_reader(iter([None])))
    assert not verdict["admitted"] and "no MemAvailable in /proc/meminfo" in verdict["message"]
    # the unit's parts become the plan's table keys the rule reads
    assert watchdog.need_table(73.76, "budget=54.76,shm=8.0,other=6.0,margin=5.0") == TABLE


def test_watchdog_unit_gives_the_plans_need_and_the_stated_figure():
    """The need and its parts are the plan's memory table's (start_need_gib), not derived again in the unit; the
    stated MemAvailable where the inventory prefers stated figures (the simulation), as the start's admission."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "_plan"))
    from _plan_fixtures import shipped_plan

    plan = shipped_plan("sim", "sim-replicas")
    table = plan["nodes"]["spark-1"]["memory"]
    [unit] = [u["watchdog"] for u in plan["nodes"]["spark-1"]["units"] if u["watchdog"]]
    node = plan["nodes"]["spark-1"]
    text = render_watchdog(
        "service", unit, _serving_plan=plan, _serving_node=node, _serving_stated_available_mib="118100"
    )
    argv = shlex.split(next(line for line in text.splitlines() if line.startswith("ExecStart="))[len("ExecStart=") :])
    given = dict(zip(argv[1::2], argv[2::2], strict=False))
    assert float(given["--mem-need-gib"]) == table["start_need_gib"]
    assert given["--mem-need-parts"] == "budget={},shm={},other={},margin={}".format(
        table["budget_gib"], table["shm_gib"], table["other_work_reserve_gib"], table["margin_gib"]
    )
    assert given["--mem-available-stated-mib"] == "118100"
    # measured figures: none stated; the admission off: no need given, the restart is not judged
    measured = render_watchdog(
        "service", unit, _serving_plan=plan, _serving_node=node, _serving_stated_available_mib=""
    )
    assert "--mem-need-gib" in measured and "--mem-available-stated-mib" not in measured
    off = render_watchdog("service", unit, _serving_plan=plan, _serving_node=node, serving_memory_admission=False)
    assert "--mem-need-gib" not in off
