"""The stand-in honours the API key as vLLM 0.32 does (issue 18): --api-key, else VLLM_API_KEY; with one, every /v1
route wants ``Authorization: Bearer <key>`` and answers 401 ``{"error": "Unauthorized"}`` without it; /health and
/metrics stay open (vLLM guards only /v1, which is why the proxy serves nothing else)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from standin_config import engine_config
from vllm._standin import engine as eng
from vllm._standin import server as srv


@pytest.fixture
def base():
    server = srv.make_server(
        eng.Engine(engine_config()), "127.0.0.1", 0, api_keys=srv.api_keys_from(None, {"VLLM_API_KEY": "k"})
    )
    srv.serve_in_thread(server)
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def get(url, key=None):
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}"} if key else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read()


def test_v1_wants_the_key_health_and_metrics_do_not(base):
    assert get(f"{base}/v1/models") == (401, json.dumps({"error": "Unauthorized"}).encode())
    assert get(f"{base}/v1/models", key="other")[0] == 401
    assert get(f"{base}/v1/models", key="k")[0] == 200
    assert get(f"{base}/health")[0] == 200 and get(f"{base}/metrics")[0] == 200


def test_the_flag_wins_over_the_environment_and_no_key_means_open():
    assert srv.api_keys_from(["a", "b"], {"VLLM_API_KEY": "k"}) == ("a", "b")
    assert srv.api_keys_from(None, {"VLLM_API_KEY": "k"}) == ("k",)
    assert srv.api_keys_from(None, {}) == ()


def test_completions_answers_one_token_with_the_key_and_401_without(base):
    body = json.dumps({"model": engine_config()["served_model_name"][0], "prompt": "Hello", "max_tokens": 1}).encode()

    def post(key=None):
        headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})}
        request = urllib.request.Request(f"{base}/v1/completions", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as refused:
            return refused.code, json.loads(refused.read())

    assert post() == (401, {"error": "Unauthorized"})
    status, answer = post(key="k")
    assert status == 200 and answer["object"] == "text_completion"
    assert len(answer["choices"]) == 1 and answer["choices"][0]["finish_reason"] == "length"
    assert answer["usage"]["completion_tokens"] == 1
