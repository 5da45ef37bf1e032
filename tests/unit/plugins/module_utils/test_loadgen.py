"""The load generator against a loopback server that streams like vLLM and is slow on its first request."""

import ssl
import threading
import time
import typing
from http.server import ThreadingHTTPServer

import pytest
from http_stub import QuietHandler
from tls_material import sim_tls

from ansible_collections.gb10.serving.plugins.module_utils import _bench, _loadgen


class Fake(QuietHandler):
    served = 0
    lock = threading.Lock()
    authorizations: typing.ClassVar[list] = []

    def do_GET(self):
        self.send_body(f'vllm:generation_tokens_total{{model_name="m"}} {Fake.served * 3}.0\n'.encode())

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        Fake.authorizations.append(self.headers.get("Authorization"))
        with Fake.lock:
            first = Fake.served == 0
            Fake.served += 1
        time.sleep(0.3 if first else 0.01)
        self.send_stream()


@pytest.fixture
def server():
    Fake.served = 0
    Fake.authorizations = []
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Fake)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def test_run_is_bounded_and_the_warmup_is_flagged(server):
    warm = _loadgen.warmup(server, "m", 16, 5)
    assert warm["warmup"] is True and warm["ok"] is True
    records = _loadgen.run(server, "m", 4, 8, "hi", 16, 5, 30)
    assert len(records) == 8 and all(r["ok"] and r["completion_tokens"] == 3 for r in records)
    summary = _bench.summarize([warm, *records])
    assert summary["requests"] == 8 and summary["warmups_excluded"] == 1
    # The slow first answer is the warm-up's (a lower bound holds on a loaded machine; an upper one did not: CI
    # measured a p90 of 0.305 s for 0.01 s answers), and it leaves no trace in the figures.
    assert warm["first_token"] - warm["start"] >= 0.3
    alone = _bench.summarize(records)
    assert {k: v for k, v in summary.items() if k != "warmups_excluded"} == {
        k: v for k, v in alone.items() if k != "warmups_excluded"
    }


def test_unreachable_endpoint_is_an_error_record():
    rec = _loadgen.one_request("http://127.0.0.1:9", "m", "hi", 4, 2)
    assert rec["ok"] is False and rec["error"]


def test_metrics_read_and_parsed(server):
    _loadgen.one_request(server, "m", "hi", 4, 5)
    assert _bench.parse_metrics(_loadgen.read_metrics(server, 5))[_bench.TOKENS_COUNTER] == 3.0


def test_every_request_sends_the_site_key_when_there_is_one(server):
    # Issue 18: with gb10_api_key set, vLLM and the proxy answer /v1 with 401 without it.
    _loadgen.warmup(server, "m", 4, 5, api_key="k1")
    _loadgen.run(server, "m", 2, 2, "hi", 4, 5, 30, api_key="k1")
    _loadgen.plain_request(server, "m", "hi", 4, 5, api_key="k1")
    load = _loadgen.Steady(server, "m", concurrency=2, timeout=5, pause_s=0.01, api_key="k1").start()
    time.sleep(0.2)
    load.stop()
    assert len(Fake.authorizations) > 5 and set(Fake.authorizations) == {"Bearer k1"}
    Fake.authorizations.clear()
    _loadgen.one_request(server, "m", "hi", 4, 5)
    assert Fake.authorizations == [None]


@pytest.fixture
def tls_server(tmp_path):
    """The fake engine behind TLS with a certificate of the simulation's CA (sim/tls.py) naming 127.0.0.11."""
    ca, pem = sim_tls(tmp_path, subnet_base="127.0.0")
    Fake.served = 0
    Fake.authorizations = []
    srv = ThreadingHTTPServer(("127.0.0.11", 0), Fake)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(pem))
    srv.socket = context.wrap_socket(srv.socket, server_side=True)
    srv.handle_error = lambda *args: None  # the refused handshakes below
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"https://127.0.0.11:{srv.server_address[1]}", str(ca)
    srv.shutdown()
    srv.server_close()


def test_https_is_verified_against_the_given_ca_and_never_without_one(tls_server):
    url, ca = tls_server
    assert _loadgen.one_request(url, "m", "hi", 4, 5, ca_path=ca)["ok"]
    assert [r["ok"] for r in _loadgen.run(url, "m", 2, 2, "hi", 4, 5, 10, ca_path=ca)] == [True, True]
    # This fake streams without a finish_reason and never answers JSON: what Steady's plain and streaming requests
    # prove here is that each got through TLS to its 200.
    assert _loadgen.plain_request(url, "m", "hi", 4, 5, ca_path=ca)["status"] == 200
    steady = _loadgen.Steady(url, "m", concurrency=2, timeout=5, pause_s=0.05, ca_path=ca).start()
    time.sleep(0.3)
    records = steady.stop()
    assert records and all(r["status"] == 200 for r in records), [(r["status"], r["error"]) for r in records]
    # Without the simulation's CA (the system store) the certificate does not verify: no request is sent.
    refused = _loadgen.one_request(url, "m", "hi", 4, 5)
    assert not refused["ok"] and "CERTIFICATE_VERIFY_FAILED" in refused["error"], refused


def test_the_filler_prompt_is_one_short_word_a_token():
    prompt = _loadgen.filler_prompt(4096)
    body = prompt.removesuffix(_loadgen.FILLER_QUESTION)
    words = body.split(" ")
    assert len(words) == 4096
    # three letters and a space: four characters a word, one token each with its leading space in byte-level BPE
    assert {len(word) for word in words} == {3}
    assert len(body) == 4 * 4096 - 1
