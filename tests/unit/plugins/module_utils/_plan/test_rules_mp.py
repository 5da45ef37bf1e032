# Copyright: gb10.serving maintainers
# Apache-2.0
"""Tensor-parallel on vLLM's own multi-node launch (launcher mp, the default; issue 35): every rank runs the same
``vllm serve`` argv with its own --node-rank, the head serving and the others --headless, no Ray anywhere; the
master port and the kernel's ephemeral range fenced to the group; a profile that would launch the group wrong is
refused by the plan, before anything runs."""

from __future__ import annotations

import pytest
from _plan_fixtures import DELETE, mp, only, plan_mod, replicas, rules, run, tp

HEAD_ADDRESS = "192.168.200.11"
# the multi-node words of the head's argv (vLLM 0.32's parser); a rank's are the same with its own --node-rank and
# --headless last
HEAD_WORDS = [
    "--tensor-parallel-size",
    "2",
    "--distributed-executor-backend",
    "mp",
    "--nnodes",
    "2",
    "--node-rank",
    "0",
    "--master-addr",
    HEAD_ADDRESS,
    "--master-port",
    "29501",
]
RANK_WORDS = [*HEAD_WORDS[:7], "1", *HEAD_WORDS[8:], "--headless"]


def _words(argv, expected):
    """The words of ``argv`` from --tensor-parallel-size on, as many as ``expected`` has."""
    start = argv.index("--tensor-parallel-size")
    return argv[start : start + len(expected)]


def _value(argv, flag):
    return argv[argv.index(flag) + 1]


def _fixed(violation):
    """The violation names where (a node or all), what (a value) and how to fix it (a verb of the fix)."""
    assert violation["node"] in ("all", "spark-a", "spark-b"), violation
    assert violation["value"] is not None, violation
    assert any(verb in violation["message"] for verb in ("Set ", "set ", "Remove ", "remove ")), violation
    return violation


# --- the launch ------------------------------------------------------------------------------------------------


def test_pitfall_ray_hangs_multi_node_default_is_mp():
    # Issue 35: multi-node groups hang on Ray in the field; a profile that names no launcher gets vLLM's own launch,
    # with no Ray unit, no ray start and no Ray variable anywhere.
    result = run(tp(launcher=DELETE, **{"vllm_options__distributed-executor-backend": DELETE}))
    assert result["violations"] == []
    assert result["launcher"] == "mp" and result["ray"] is None and result["mp"] is not None
    assert {host: entry["role"] for host, entry in result["nodes"].items()} == {
        "spark-a": "tp_head",
        "spark-b": "tp_rank",
    }
    for entry in result["nodes"].values():
        assert _value(entry["argv"], "--distributed-executor-backend") == "mp"
        assert entry["ray_start"] == [] and not [k for k in entry["env"] if k.startswith("RAY_")]
    assert "ray" not in " ".join(u["unit"] for entry in result["nodes"].values() for u in entry["units"])
    # omitted and written out plan the same
    assert result["nodes"] == run(mp())["nodes"]


def test_mp_profile_plans_clean_each_rank_a_vllm_serve_the_head_serving():
    result = run(mp())
    assert result["violations"] == [], plan_mod.format_plan(result)
    head, rank = result["nodes"]["spark-a"], result["nodes"]["spark-b"]
    assert (head["role"], head["rank"], head["serves"], head["port"]) == ("tp_head", 0, True, 8000)
    assert (rank["role"], rank["rank"], rank["serves"], rank["port"]) == ("tp_rank", 1, False, None)
    assert result["serving_hosts"] == ["spark-a"] and result["tensor_parallel_size"] == 2
    for entry in (head, rank):
        assert entry["argv"][:2] == ["vllm", "serve"]
        assert entry["ray_start"] == []
    # a replica has no rank, and no launcher
    plain = run(replicas())
    assert {entry["rank"] for entry in plain["nodes"].values()} == {None} and plain["launcher"] is None


def test_mp_argv_every_rank_the_same_but_its_node_rank_and_headless():
    result = run(mp())
    head, rank = result["nodes"]["spark-a"]["argv"], result["nodes"]["spark-b"]["argv"]
    assert _words(head, HEAD_WORDS) == HEAD_WORDS and "--headless" not in head
    assert _words(rank, RANK_WORDS) == RANK_WORDS and rank.count("--headless") == 1
    # each flag once: the launcher's words are not repeated from vllm_options
    for flag in ("--tensor-parallel-size", "--distributed-executor-backend", "--nnodes", "--node-rank"):
        assert head.count(flag) == rank.count(flag) == 1, flag
    # Rank 1's argv is the head's with only --node-rank and --headless changed. (--host is each node's own listen
    # address, as on every node that runs vLLM; a headless rank opens no API on it.)
    assert _value(head, "--host") == HEAD_ADDRESS and _value(rank, "--host") == "192.168.200.12"
    expected = list(head)
    expected[expected.index("--host") + 1] = "192.168.200.12"
    expected[expected.index("--node-rank") + 1] = "1"
    expected.insert(expected.index("--master-port") + 2, "--headless")
    assert rank == expected


def test_mp_env_names_the_fabric_and_no_ray():
    result = run(mp())
    for host, address in (("spark-a", HEAD_ADDRESS), ("spark-b", "192.168.200.12")):
        env = result["nodes"][host]["env"]
        assert env["VLLM_HOST_IP"] == address
        assert env["NCCL_SOCKET_IFNAME"] == env["GLOO_SOCKET_IFNAME"] == "enp1s0f0np0"
        assert not [k for k in env if k.startswith("RAY_")], host
        assert "MASTER_ADDR" not in env and "MASTER_PORT" not in env


def test_mp_fence_the_master_port_on_the_head_and_the_ephemeral_range_from_the_peers():
    result = run(mp())
    assert result["ray"] is None
    launch = {k: result["mp"][k] for k in ("master_address", "master_port", "ephemeral_ports", "firewall")}
    assert launch == {
        "master_address": HEAD_ADDRESS,
        "master_port": 29501,
        "ephemeral_ports": [32768, 60999],
        "firewall": True,
    }
    assert result["fence"] == {
        "launcher": "mp",
        "firewall": True,
        "peers": [HEAD_ADDRESS, "192.168.200.12"],
        "listen": {"spark-a": [29501], "spark-b": []},
        "ranges": [[32768, 60999]],
    }
    assert "master 192.168.200.11:29501; firewall on" in plan_mod.format_plan(result)
    # the Ray launcher's fence is the same shape, with Ray's ports; replicas have none
    ray = run(tp())["fence"]
    assert ray["launcher"] == "ray" and ray["ranges"] == [[10002, 10999]] and 6379 in ray["listen"]["spark-a"]
    assert run(tp())["mp"] is None
    assert run(replicas())["fence"] is None and run(replicas())["mp"] is None


def test_mp_settings_from_the_profile_reach_every_ranks_argv_and_the_fence():
    result = run(mp(mp={"master_port": 23456, "ephemeral_ports": [40000, 50000], "firewall": True}))
    assert result["violations"] == []
    for entry in result["nodes"].values():
        assert _value(entry["argv"], "--master-port") == "23456"
        assert _value(entry["argv"], "--master-addr") == HEAD_ADDRESS
    assert result["fence"]["listen"] == {"spark-a": [23456], "spark-b": []}
    assert result["fence"]["ranges"] == [[40000, 50000]] and result["fence"]["firewall"] is True
    assert result["mp"]["firewall"] is True


def test_ray_only_rules_do_not_judge_an_mp_group():
    # ray_settings, ray_open and tp_ray_memory_monitor apply to the Ray launcher only
    assert run(mp(ray={"auth": "password"}))["violations"] == []
    assert run(mp(ray={"auth": "disabled", "firewall": False}))["violations"] == []
    assert run(mp(env={"RAY_memory_monitor_refresh_ms": "1000"}))["violations"] == []
    assert rules(run(tp(ray={"auth": "disabled", "firewall": False}))) == ["ray_open"]


def test_mp_head_is_judged_for_the_groups_memory_share():
    violation = only(run(mp(defaults__gpu_memory_utilization=0.99)), "gpu_memory_utilization")
    assert violation["node"] == "spark-a" and "tensor-parallel group" in violation["message"]


# --- refused profiles ------------------------------------------------------------------------------------------


def test_tp_launcher():
    violation = only(run(mp(launcher="slurm")), "tp_launcher")
    assert violation["node"] == "all" and violation["value"] == "slurm"
    assert "launcher 'slurm' is not one of mp, ray" in violation["message"]
    # both launchers plan clean
    assert run(mp())["violations"] == [] and run(tp())["violations"] == []


def test_mp_launcher_refuses_a_ray_executor_backend():
    violation = _fixed(only(run(mp(**{"vllm_options__distributed-executor-backend": "ray"})), "tp_executor_backend"))
    assert violation["node"] == "all" and violation["value"] == "ray"
    assert "launcher is mp (set by the profile)" in violation["message"]
    assert "Remove distributed-executor-backend from vllm_options" in violation["message"]
    # with no launcher named, the default (mp) is what a ray backend disagrees with
    violation = only(run(tp(launcher=DELETE)), "tp_executor_backend")
    assert "launcher is mp (the default" in violation["message"] and "launcher: ray" in violation["message"]


def test_ray_launcher_refuses_an_mp_executor_backend():
    violation = _fixed(only(run(tp(**{"vllm_options__distributed-executor-backend": "mp"})), "tp_executor_backend"))
    assert violation["value"] == "mp" and "launcher is ray" in violation["message"]


@pytest.mark.parametrize(
    ("changes", "value", "message"),
    [
        # vLLM's own port, as the master port: the head's API and torch.distributed's store on one port
        ({"mp": {"master_port": 8000}}, 8000, "the master port 8000 is also vLLM's port (port:)"),
        ({"port": 29501}, 29501, "the master port 29501 is also vLLM's port (port:)"),
        # inside the kernel's ephemeral range: any outgoing connection may hold it when the head starts
        ({"mp": {"master_port": 40000}}, 40000, "the master port 40000 lies in the ephemeral range 32768-60999"),
        ({"mp": {"foo": 1}}, 1, "mp.foo 1 is not a setting of mp: (firewall, master_port, ephemeral_ports): remove it"),
        ({"mp": [29501]}, [29501], "mp [29501] must be a mapping"),
        ({"mp": {"master_port": 80}}, 80, "mp.master_port 80 must be a port number from 1024 to 65535"),
        ({"mp": {"firewall": "yes"}}, "yes", "mp.firewall 'yes' must be true or false"),
        ({"mp": {"ephemeral_ports": [60999, 32768]}}, [60999, 32768], "mp.ephemeral_ports [60999, 32768] must be"),
        # torch.distributed's own rendezvous variables would point the ranks elsewhere than the plan's argv
        ({"env": {"MASTER_ADDR": "10.0.0.1"}}, "MASTER_ADDR", "env MASTER_ADDR would point torch.distributed"),
        ({"env": {"MASTER_PORT": "29500"}}, "MASTER_PORT", "env MASTER_PORT would point torch.distributed"),
    ],
    ids=[
        "master-port-is-vllms-port",
        "vllms-port-is-the-master-port",
        "master-port-in-ephemeral-range",
        "unknown-setting",
        "not-a-mapping",
        "master-port-below-1024",
        "firewall-not-bool",
        "ephemeral-range-reversed",
        "env-MASTER_ADDR",
        "env-MASTER_PORT",
    ],
)
def test_mp_settings(changes, value, message):
    violation = only(run(mp(**changes)), "mp_settings")
    assert violation["node"] == "all" and violation["value"] == value
    assert message in violation["message"], violation["message"]


def test_mp_settings_port_clashes_name_the_fix():
    for changes in ({"mp": {"master_port": 8000}}, {"mp": {"master_port": 40000}}):
        violation = _fixed(only(run(mp(**changes)), "mp_settings"))
        assert "Set mp.master_port to a free port below 32768 (default 29501)" in violation["message"]
    violation = _fixed(only(run(mp(env={"MASTER_ADDR": "10.0.0.1"})), "mp_settings"))
    assert "remove it from the profile's env" in violation["message"]
    assert f"--master-addr {HEAD_ADDRESS} --master-port 29501" in violation["message"]


def test_mp_settings_the_proxys_port_is_not_the_master_port():
    api = {
        "key_set": True,
        "anonymous": False,
        "bind": "0.0.0.0",
        "port": 29501,
        "tls": False,
        "ca": None,
        "client_host": "spark-a",
        "vip_address": None,
        "fabric_address": None,
    }
    violation = only(run(mp(), api=api), "mp_settings")
    assert "the master port 29501 is also the proxy's client port (gb10_proxy_port)" in violation["message"]


def test_mp_settings_judge_the_mp_launcher_only():
    # the Ray launcher and replicas run no master port: an mp: mapping there is not judged
    assert "mp_settings" not in rules(run(tp(mp={"master_port": 40000})))
    assert "mp_settings" not in rules(run(replicas(mp={"master_port": 40000})))


@pytest.mark.parametrize("key", ["image", "model", "revision", "vllm_options", "env", "launcher"])
def test_tp_rank_same_target(key):
    value = {"ref": "ghcr.io/example-org/other@sha256:" + "cd" * 32} if key == "image" else {"x": "1"}
    violation = _fixed(only(run(mp(nodes={"spark-b": {key: value}})), "tp_rank_same_target"))
    assert violation["node"] == "spark-b" and violation["value"] == f"nodes.spark-b.{key}"
    assert f"Remove nodes.spark-b.{key} and set it once for the profile" in violation["message"]


def test_tp_rank_same_target_on_the_head_and_with_either_launcher():
    violation = only(run(mp(nodes={"spark-a": {"env": {"A": "1"}}})), "tp_rank_same_target")
    assert violation["node"] == "spark-a"
    violation = only(run(tp(nodes={"spark-b": {"image": {"ref": "x"}}})), "tp_rank_same_target")
    assert violation["node"] == "spark-b"


@pytest.mark.parametrize(
    ("option", "value", "fix"),
    [
        ("master-addr", "10.0.0.1", "the plan sets the head's fabric address"),
        ("nnodes", 2, "the plan derives it from the tensor-parallel group"),
        ("headless", True, "the plan runs every rank but the head headless"),
        ("node-rank", 1, "the plan gives each rank its own"),
        ("master-port", 29500, "set mp.master_port"),
    ],
)
def test_mp_launch_options_are_the_plans_not_vllm_options(option, value, fix):
    violation = only(run(mp(**{f"vllm_options__{option}": value})), "vllm_option_owned_by_plan")
    assert violation["node"] == "all" and violation["value"] == f"--{option}"
    assert (
        "is written by the plan, not by vllm_options: remove it" in violation["message"] and fix in violation["message"]
    )


def test_mp_open():
    # vLLM's multi-node launch has no authentication: its firewall is the only fence, and the plan never drops it.
    violation = _fixed(only(run(mp(mp={"firewall": False})), "mp_open"))
    assert violation["node"] == "all" and violation["value"] == "mp.firewall=false"
    assert f"{HEAD_ADDRESS}:29501" in violation["message"] and "32768-60999" in violation["message"]
    assert "Remove mp.firewall" in violation["message"]
    assert "mp_open" not in rules(run(mp())) and "mp_open" not in rules(run(tp(mp={"firewall": False})))


def test_mp_settings_vllms_port_in_the_ephemeral_range_names_that_port_and_its_fix():
    violation = _fixed(only(run(mp(port=40001)), "mp_settings"))
    assert violation["value"] == 40001
    assert "vLLM's port (port:) (40001) lies in the ephemeral range 32768-60999" in violation["message"]
    assert "Move vLLM's port (port:) below 32768" in violation["message"]
