# Copyright: gb10.serving maintainers
# Apache-2.0
"""playbooks/bench.yml's sweep play, run by the real ansible-playbook against loopback servers that stream like
vLLM (issue 20): a line in the Ansible output as each (target, prompt, concurrency) point finishes, and a run
stopped with Ctrl-C after k points that the next run resumes, measuring only the points not recorded."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from http_stub import QuietHandler
from task_file_runner import playbook_argv, playbook_environment

REPO = Path(__file__).resolve().parents[3]
LEVELS = [1, 2, 3]
POINTS = 2 * 1 * len(LEVELS)  # spark-1 and the proxy, one prompt kind


class Engine(QuietHandler):
    """One streamed answer of three tokens per POST, after ``delay_s`` (so a point lasts long enough to stop)."""

    def do_GET(self):
        self.send_body(f"vllm:generation_tokens_total {self.server.posts * 3}.0\n".encode())

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        with self.server.lock:
            self.server.posts += 1
        time.sleep(self.server.delay_s)
        self.send_stream()


@pytest.fixture
def site():
    servers = []
    for _name in ("spark-1", "proxy"):
        srv = ThreadingHTTPServer(("127.0.0.1", 0), Engine)
        srv.posts, srv.delay_s, srv.lock = 0, 0.3, threading.Lock()
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
    yield [f"http://127.0.0.1:{s.server_address[1]}" for s in servers], servers
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def sweep_play(tmp_path, urls, context_length=8192, prompts=None):
    """The Sweep play of bench.yml as it is, less the task that lists the replicas from the inventory."""
    play = yaml.safe_load((REPO / "playbooks" / "bench.yml").read_text())[-1]
    play["tasks"] = [t for t in play["tasks"] if not t["name"].startswith("List the replicas")]
    play["vars"]["gb10_serving_plan"] = {
        "topology": "replicas",
        "api": {"url": urls[1]},
        "model": {"served_model_name": "m", "context_length": context_length},
        "nodes": {"spark-1": {"port": 8000}},
    }
    play["vars"]["__bench_replicas"] = [{"name": "spark-1", "url": urls[0]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{**play, "connection": "local"}]))
    extra = {
        "bench_concurrency": LEVELS,
        "bench_prompts": prompts or {"short": 8},
        "bench_requests_per_worker": 1,
        "bench_max_tokens": 4,
        "bench_report_dir": str(tmp_path / "report"),
    }
    (tmp_path / "extra.json").write_text(json.dumps(extra))
    return playbook_argv(tmp_path / "play.yml", "localhost,", ["-e", "@" + str(tmp_path / "extra.json")])


def run(tmp_path, argv, stop_after=None, args=()):
    """(returncode, output, state rows when stopped) of one run; ``stop_after``: Ctrl-C once that many points
    are recorded in the state file, as an operator would."""
    env = playbook_environment(tmp_path, {"ANSIBLE_CALLBACK_RESULT_FORMAT": "json"})
    proc = subprocess.Popen([*argv, *args], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    state = tmp_path / "report" / "bench-state.json"
    rows = None
    if stop_after is not None:
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if state.exists() and len(json.loads(state.read_text())["rows"]) >= stop_after:
                proc.send_signal(signal.SIGINT)
                break
            time.sleep(0.02)
    out, _err = proc.communicate(timeout=300)
    if stop_after is not None:
        rows = json.loads(state.read_text())["rows"]
    return proc.returncode, out.decode(), rows


def test_the_sweep_prints_each_point_and_resumes_after_an_interruption(tmp_path, site):
    urls, servers = site
    argv = sweep_play(tmp_path, urls)
    rc, out, kept = run(tmp_path, argv, stop_after=2)
    assert rc != 0, out[-3000:]
    assert 2 <= len(kept) < POINTS, out[-3000:]
    assert f"(item=spark-1 short concurrency 1: 1/{POINTS} points done, " in out, out[-3000:]
    assert not (tmp_path / "report" / "bench.json").exists()

    posts = [s.posts for s in servers]
    rc, out, _rows = run(tmp_path, argv)
    assert rc == 0, out[-3000:]
    print(out)
    report = json.loads((tmp_path / "report" / "bench.json").read_text())
    assert report["rows"][: len(kept)] == kept, "a recorded point was measured again or changed"
    order = [(r["target"], r["prompt"], r["concurrency"]) for r in report["rows"]]
    assert order == [(t, "short", lv) for t in ("spark-1", "proxy") for lv in LEVELS]
    assert all(r["requests"] == r["concurrency"] and r["errors"] == 0 for r in report["rows"]), report["rows"]
    # The resumed run printed the resume and only the points it measured, then the table.
    first = len(kept) + 1
    target, level = order[first - 1][0], order[first - 1][2]
    assert f"(item={target} short concurrency {level}: {first}/{POINTS} points done, " in out
    assert f"resumed: {len(kept)} of {POINTS} point(s) recorded earlier" in out
    assert f": {len(kept)}/{POINTS} points done" not in out
    assert f"{POINTS}/{POINTS} points done, " in out and "sweep complete" in out
    assert "| proxy | short | 3 | 3 | 0 |" in out
    # Requests of the resumed run: one warm-up per target it still measured, then each remaining point's.
    sent = sum(s.posts for s in servers) - sum(posts)
    remaining = order[len(kept) :]
    assert sent == len({t for t, _k, _lv in remaining}) + sum(lv for _t, _k, lv in remaining)

    # Run again: nothing left to measure; the report is written again. bench_fresh=true measures everything.
    rc, out, _rows = run(tmp_path, argv)
    assert rc == 0 and f"{POINTS}/{POINTS} points done, sweep complete; resumed: {POINTS} of {POINTS}" in out, out
    rc, out, _rows = run(tmp_path, argv, args=("-e", "bench_fresh=true"))
    assert rc == 0 and f"fresh sweep asked for: {POINTS} recorded point(s) discarded" in out, out[-3000:]
    assert f"(item=spark-1 short concurrency 1: 1/{POINTS} points done, " in out


def test_a_prompt_over_the_served_context_is_refused_before_any_load(tmp_path, site):
    urls, servers = site
    rc, out, _rows = run(tmp_path, sweep_play(tmp_path, urls, context_length=512, prompts={"short": 8, "long": 4096}))
    assert rc != 0
    assert "bench_prompts.long is 4096 tokens" in out and "over the served context of 512" in out, out[-3000:]
    assert [s.posts for s in servers] == [0, 0]
    assert not (tmp_path / "report" / "bench-state.json").exists()
