# Copyright: gb10.serving maintainers
# Apache-2.0
"""The rolling upgrade's decisions: in-flight requests from a replica's own /metrics, the tool-call smoke test,
what differs from the target, the failure message and the bench figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.gb10.serving.plugins.filter.rolling_upgrade import FilterModule
from ansible_collections.gb10.serving.plugins.module_utils import _rolling_upgrade as ru

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
REAL_METRICS = (FIXTURES / "metrics" / "vllm_metrics_dgx-spark_grep_0.22.1rc1.txt").read_text()
TOOL_CALL = json.loads((FIXTURES / "toolcall" / "vllm_chat_completion_tool_calls_0.23.json").read_text())


def completion(content="", tool_calls=()):
    return {"choices": [{"message": {"role": "assistant", "content": content, "tool_calls": list(tool_calls)}}]}


def call(name="get_weather", arguments='{"city": "Helsinki"}'):
    return {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}


def test_in_flight_reads_real_vllm_metrics():
    assert ru.in_flight(REAL_METRICS) == {"running": 0.0, "waiting": 0.0, "total": 0.0}


def test_in_flight_sums_running_and_waiting_over_engines():
    text = (
        'vllm:num_requests_running{engine="0",model_name="m"} 2.0\n'
        'vllm:num_requests_running{engine="1",model_name="m"} 1.0\n'
        'vllm:num_requests_waiting{engine="0",model_name="m"} 3.0\n'
        'vllm:num_requests_waiting_by_reason{engine="0",model_name="m",reason="capacity"} 9.0\n'
    )
    assert ru.in_flight(text) == {"running": 3.0, "waiting": 3.0, "total": 6.0}


def test_pitfall_metrics_through_the_proxy_are_refused_as_not_vllm():
    # seed 002: the proxy's /metrics (or an HTML error page) is not the replica's: never read it as "idle"
    with pytest.raises(ValueError, match="not a vLLM /metrics endpoint"):
        ru.in_flight('haproxy_backend_current_sessions{proxy="vllm"} 0\n')


def test_smoke_request_has_one_tool_and_auto_choice():
    body = ru.smoke_request("tiny-moe", 64)
    assert body["tool_choice"] == "auto" and body["max_tokens"] == 64 and body["model"] == "tiny-moe"
    assert [t["function"]["name"] for t in body["tools"]] == ["get_weather"]


STRICT = {
    "type": "function",
    "function": {
        "name": "weather",
        "strict": True,
        "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Oulu"]}}},
    },
}


def test_smoke_request_names_the_given_tool_for_a_model_that_calls_none_by_itself():
    body = ru.smoke_request("tiny-moe", 64, STRICT, "named")
    assert body["tools"] == [STRICT]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "weather"}}
    assert ru.smoke_request("tiny-moe", 64, STRICT, "required")["tool_choice"] == "required"
    with pytest.raises(ValueError, match="none of auto, required, named"):
        ru.smoke_request("tiny-moe", 64, STRICT, "forced")


def test_smoke_verdict_judges_the_given_tool():
    assert ru.smoke_verdict(completion(tool_calls=[call(name="weather")]), tool=STRICT)["ok"]
    verdict = ru.smoke_verdict(completion(tool_calls=[call()]), tool=STRICT)
    assert not verdict["ok"] and "instead of weather" in verdict["reason"]


def test_smoke_passes_a_well_formed_call():
    verdict = ru.smoke_verdict(completion(tool_calls=[call()]))
    assert verdict["ok"], verdict
    assert "get_weather" in verdict["reason"]


def test_smoke_reads_a_real_vllm_tool_call_shape():
    # the fixture calls another tool: well-formed, but not the smoke test's
    verdict = ru.smoke_verdict(TOOL_CALL)
    assert not verdict["ok"] and "instead of get_weather" in verdict["reason"]


def test_pitfall_wrong_tool_call_parser_leaves_the_call_as_text():
    raw = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "sim"}}\n</tool_call>'
    verdict = ru.smoke_verdict(completion(content=raw), parser="llama3_json")
    assert not verdict["ok"]
    assert "came back as text in content" in verdict["reason"] and "(llama3_json)" in verdict["reason"]
    assert "tool-call-parser" in verdict["reason"]


@pytest.mark.parametrize(
    ("response", "words"),
    [
        (completion(tool_calls=[call(arguments='{"city": ')]), "arguments are not JSON"),
        (completion(tool_calls=[call(arguments="[1]")]), "not a JSON object"),
        (completion(content="It is sunny."), "no tool call"),
        ({"error": {"message": "boom"}}, "no usable chat completion"),
        ("", "no usable chat completion"),
    ],
)
def test_smoke_refuses_malformed_or_missing_calls(response, words):
    verdict = ru.smoke_verdict(response)
    assert not verdict["ok"] and words in verdict["reason"]


def test_warmup_verdict():
    assert ru.warmup_verdict(completion(content="hello"))["ok"]
    assert not ru.warmup_verdict({"error": {"message": "x"}})["ok"]
    assert not ru.warmup_verdict({"choices": [{"message": {"content": None}}]})["ok"]


def container(image="reg/img@sha256:" + "a" * 64, argv=("vllm", "serve", "/snap", "--port", "8000"), env=None):
    env = {"HF_HUB_OFFLINE": "1", "MAX_JOBS": "2", "PATH": "/opt/venv/bin"} if env is None else env
    return {
        "State": {"Running": True, "Status": "running"},
        "Config": {
            "Image": image,
            "Entrypoint": [argv[0]],
            "Cmd": list(argv[1:]),
            "Env": [f"{k}={v}" for k, v in env.items()],
        },
    }


def test_no_drift_when_the_container_runs_the_target():
    image = "reg/img@sha256:" + "a" * 64
    argv = ["vllm", "serve", "/snap", "--port", "8000"]
    assert ru.node_drift(container(), image, argv, {"HF_HUB_OFFLINE": "1", "MAX_JOBS": 2}) == []


def test_no_drift_for_the_secrets_loader_in_front_of_the_target_argv():
    # Issue 37 item 2: a container that gets the serving secrets runs the plan's argv through gb10-secrets-exec.
    image = "reg/img@sha256:" + "a" * 64
    argv = ["vllm", "serve", "/snap", "--port", "8000"]
    wrapped = ["python3", "-I", "/run/gb10/secrets-exec", "/run/gb10/secrets.env", "--", *argv]
    assert ru.node_drift(container(argv=wrapped), image, argv, {"HF_HUB_OFFLINE": "1"}) == []
    assert "added /snap2" in ru.node_drift(container(argv=wrapped), image, [*argv[:2], "/snap2", *argv[3:]], {})[0]


def test_drift_names_image_argv_and_environment():
    drift = ru.node_drift(
        container(),
        "reg/img@sha256:" + "b" * 64,
        ["vllm", "serve", "/snap2", "--port", "8000"],
        {"HF_HUB_OFFLINE": "1", "MAX_JOBS": "4"},
    )
    assert drift[0].startswith("image reg/img@sha256:aaa")
    assert "removed /snap" in drift[1] and "added /snap2" in drift[1]
    assert drift[2] == "environment MAX_JOBS: '2' -> '4'"


def test_drift_when_nothing_runs():
    assert ru.node_drift(None, "i", ["vllm"], {}) == ["no serving container runs"]
    stopped = container()
    stopped["State"] = {"Running": False, "Status": "exited"}
    assert ru.node_drift(stopped, "i", ["vllm"], {}) == ["the serving container is exited"]


def test_a_replica_is_ready_only_where_every_proxy_holds_it_ready():
    def server(name, up=True, admin="ready"):
        return {"name": name, "up": up, "admin": admin, "operational": "running" if up else "stopped"}

    first = [server("spark-1"), server("spark-2", admin="drain")]
    second = [server("spark-1", up=False), server("spark-2")]
    merged = {s["name"]: s for s in ru.merge_proxy_views([first, second])}
    assert merged["spark-1"]["up"] is False and merged["spark-1"]["operational"] == "stopped"
    assert merged["spark-2"]["admin"] == "drain" and merged["spark-2"]["up"] is True
    assert first[0]["up"] is True  # the views are not changed


def test_failure_message_says_what_where_and_how_to_resume():
    msg = ru.failure_message("spark-2", "Require a well-formed tool call", "boom", ["spark-1"], "ansible-playbook x")
    assert "spark-2 stays DRAINED" in msg and "ready: spark-1" in msg
    assert "across HAProxy restarts and reboots" in msg and "playbooks/ready.yml -e ready_servers=spark-2" in msg
    assert (
        "'Require a well-formed tool call': boom" in msg and "resume with the same command: ansible-playbook x" in msg
    )
    assert "none (check the proxy" in ru.failure_message("n", "s", "e", [], "c")
    assert "n was not drained or changed" in ru.failure_message("n", "s", "e", ["m"], "c", drained=False)
    assert "ready.yml" not in ru.failure_message("n", "s", "e", ["m"], "c", drained=False)


def test_node_timings_overhead_is_everything_but_the_restart():
    marks = {"drain": 100.0, "stopped": 103.0, "started": 110.0, "healthy": 125.0, "ready": 131.0}
    assert ru.node_timings(marks) == {
        "total_s": 31.0,
        "drain_wait_s": 3.0,
        "restart_s": 15.0,
        "after_healthy_s": 6.0,
        "overhead_s": 16.0,
    }


def test_filters_are_registered():
    filters = FilterModule().filters()
    assert filters["vllm_in_flight"](REAL_METRICS)["total"] == 0
    assert (
        filters["upgrade_node_timings"]({"drain": 0, "stopped": 1, "started": 2, "healthy": 3, "ready": 4})[
            "overhead_s"
        ]
        == 3.0
    )
