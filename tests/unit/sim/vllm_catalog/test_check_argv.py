# Copyright: gb10.serving maintainers
# Apache-2.0
"""sim/vllm_catalog/check_argv.py's own logic, without vLLM: the exact-spelling check it applies to the real parser's
option table, the labels a plan file's argv get (a refusal must name the inventory, profile and node), and the
known-bad cases that prove `make argv-real` can fail. The real parser runs only in `make argv-real`."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]
HERE = REPO / "sim" / "vllm_catalog"
_spec = importlib.util.spec_from_file_location("check_argv", HERE / "check_argv.py")
check_argv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_argv)

OPTIONS = {"--kv-cache-memory-bytes", "--max-model-len", "--max-num-seqs", "--enable-prefix-caching", "--help", "-h"}
STAGES = {"parse", "exact", "validate", "parsers", "engine"}


def test_exact_spellings_pass():
    words = ["--max-model-len", "4096", "--max-num-seqs=4", "--enable-prefix-caching", "-h"]
    assert check_argv.inexact_options(words, OPTIONS) == []


def test_an_abbreviation_is_named_with_what_vllm_reads():
    (message,) = check_argv.inexact_options(["--kv-cache-memory", "1"], OPTIONS)
    assert message.startswith("--kv-cache-memory ")
    assert "--kv-cache-memory-bytes" in message


def test_the_underscore_spelling_is_refused():
    (message,) = check_argv.inexact_options(["--max_model_len=4096"], OPTIONS)
    assert message.startswith("--max_model_len ") and "reads it as --max-model-len" in message


def test_an_ambiguous_prefix_names_every_candidate():
    (message,) = check_argv.inexact_options(["--max"], OPTIONS)
    assert "--max-model-len or --max-num-seqs" in message


def test_values_are_not_options():
    assert check_argv.inexact_options(["--max-model-len", "-1", "--", "x"], OPTIONS) == []


def _plan(tmp_path, name, nodes, violations=()):
    path = tmp_path / name
    path.write_text(json.dumps({"profile": "p", "nodes": nodes, "violations": list(violations)}))
    return str(path)


def test_plan_labels_name_inventory_profile_and_node(tmp_path):
    path = _plan(
        tmp_path,
        "sim.sim-replicas.json",
        {"spark-2": {"argv": ["vllm", "serve", "m"], "env": {"A": "1"}}, "spark-1": {"argv": ["vllm", "serve", "n"]}},
    )
    labels = [(label, env) for label, _argv, env, _inv in check_argv.file_argvs(path)]
    assert labels == [("sim.sim-replicas/spark-1", {}), ("sim.sim-replicas/spark-2", {"A": "1"})]


def test_a_node_without_argv_is_not_checked(tmp_path):
    path = _plan(tmp_path, "x.tp.json", {"spark-1": {"argv": ["vllm", "serve", "m"]}, "spark-2": {"argv": []}})
    assert [item[0] for item in check_argv.file_argvs(path)] == ["x.tp/spark-1"]


def test_a_refused_plan_is_one_item_without_argv(tmp_path):
    path = _plan(tmp_path, "x.bad.json", {"spark-1": {"argv": ["vllm", "serve", "m"]}}, violations=["nope"])
    assert check_argv.file_argvs(path) == [("x.bad", None, {}, "x")]


CASE = {"argv": ["vllm", "serve", "m", "--max-num-seqs", "four"], "refused_at": "parse"}


@pytest.mark.parametrize(
    ("results", "failures"),
    [
        ([("parse", "refused: invalid int value: 'four'")], []),
        ([("parse", "ok"), ("exact", "ok"), ("validate", "ok"), ("parsers", "ok")], ["bad: accepted, expected"]),
        ([("parse", "ok"), ("exact", "refused: x")], ["bad: refused at exact, expected at parse"]),
    ],
)
def test_a_known_bad_case_must_be_refused_at_its_stage(results, failures):
    found = check_argv.expectation_failures({"bad": CASE}, {"bad": results})
    assert len(found) == len(failures)
    assert [f[: len(want)] for f, want in zip(found, failures, strict=True)] == failures


def test_a_known_bad_case_that_never_ran_fails():
    assert check_argv.expectation_failures({"bad": CASE}, {}) == ["bad: accepted, expected refused at parse"]


def test_known_bad_cases_cover_every_stage():
    cases = json.loads((HERE / "known_bad.json").read_text())
    assert {case["refused_at"] for case in cases.values()} == STAGES
    for name, case in cases.items():
        assert case["argv"][:2] == ["vllm", "serve"], name
        # the engine stage runs only on a model directory, which the case's config.json makes
        assert ("config" in case) == (case["refused_at"] == "engine"), name
    words = [w for case in cases.values() for w in case["argv"]]
    assert "--kv-cache-memory" in words  # the abbreviation the plan refuses and argparse would take
    assert "--max-num-seqs" in words


def test_the_long_context_case_asks_past_its_own_config():
    cases = json.loads((HERE / "known_bad.json").read_text())
    (case,) = [c for c in cases.values() if c["refused_at"] == "engine" and "--max-model-len" in c["argv"]]
    asked = int(case["argv"][case["argv"].index("--max-model-len") + 1])
    assert asked > case["config"]["max_position_embeddings"]


def test_plan_files_name_their_inventory(tmp_path):
    sim = _plan(tmp_path, "sim.sim-tp.json", {"spark-1": {"argv": ["vllm", "serve", "m"]}})
    loose = _plan(tmp_path, "plan.json", {"spark-1": {"argv": ["vllm", "serve", "m"]}})
    assert [item[3] for item in check_argv.file_argvs(sim) + check_argv.file_argvs(loose)] == ["sim", None]


def test_the_sim_model_dir_holds_the_sim_models_config(tmp_path):
    folder = check_argv.write_model_dir(str(tmp_path / "m"), check_argv.sim_model_config())
    config = json.loads((Path(folder) / "config.json").read_text())
    assert config["architectures"] and config["max_position_embeddings"] >= 4096
