# Copyright: gb10.serving maintainers
# Apache-2.0
"""playbooks/status.yml's reading of roles/monitoring's Prometheus: its own two tasks, run by the real
ansible-playbook against a stand-in of Prometheus's /api/v1/query (the answer shape of its HTTP API)."""

from __future__ import annotations

import http.server
import json
import threading
import urllib.parse
from pathlib import Path

import pytest
import yaml
from task_file_runner import run_task_file

REPO = Path(__file__).resolve().parents[3]
ANSWERS = {
    "gb10_replica:vllm_generation_tokens:rate": [({"node": "spark-1"}, "91.5"), ({"node": "spark-2"}, "82.25")],
    "gb10:vllm_generation_tokens:rate": [({}, "173.75")],
    "gb10:up:sum": [({"job": "vllm"}, "2")],
}


class _Prometheus(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        query = urllib.parse.parse_qs(url.query).get("query", [""])[0]
        self.server.seen.append(query)
        result = [{"metric": m, "value": [1700000000.0, v]} for m, v in ANSWERS.get(query, [])]
        body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def prometheus():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Prometheus)
    server.seen = []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def test_status_shows_the_recorded_figures_per_replica_and_summed(tmp_path, prometheus):
    plays = yaml.safe_load((REPO / "playbooks" / "status.yml").read_text())
    last = plays[-1]
    tasks = [t for t in last["tasks"] if "recorded figures" in t["name"]]
    assert len(tasks) == 2
    (tmp_path / "tasks.yml").write_text(yaml.safe_dump(tasks))
    url = f"http://127.0.0.1:{prometheus.server_address[1]}"
    rc, out = run_task_file(
        tmp_path,
        tmp_path / "tasks.yml",
        {
            "__status_prometheus": url,
            "__status_prometheus_host": "",
            "__status_recorded": last["vars"]["__status_recorded"],
        },
        name="status from Prometheus",
    )
    assert rc == 0, out
    assert sorted(prometheus.seen) == sorted(last["vars"]["__status_recorded"].values())
    assert '"tokens/s: spark-1 91.5, spark-2 82.25"' in out
    assert '"tokens/s summed: total 173.75"' in out
    assert '"targets up: vllm 2.0"' in out
    assert '"running: no series"' in out


def test_status_skips_prometheus_where_monitoring_is_off(tmp_path):
    plays = yaml.safe_load((REPO / "playbooks" / "status.yml").read_text())
    last = plays[-1]
    tasks = [t for t in last["tasks"] if "recorded figures" in t["name"]]
    (tmp_path / "tasks.yml").write_text(yaml.safe_dump(tasks))
    rc, out = run_task_file(
        tmp_path,
        tmp_path / "tasks.yml",
        {
            "__status_prometheus": "",
            "__status_prometheus_host": "",
            "__status_recorded": last["vars"]["__status_recorded"],
        },
        name="status without Prometheus",
    )
    assert rc == 0, out
    assert "skipping" in out and "prometheus http" not in out
