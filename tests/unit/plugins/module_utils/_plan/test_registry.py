# Copyright: gb10.serving maintainers
# Apache-2.0
"""The rule registry is the single list of rule names: every rule has its test and its pitfall, and no
violation is produced under a name that is not registered."""

from __future__ import annotations

import ast
import importlib
import re

import pytest
from _plan_fixtures import REPO, nodes, plan_mod, run, tp

registry = importlib.import_module("ansible_collections.gb10.serving.plugins.module_utils._plan.registry")
violation_mod = importlib.import_module("ansible_collections.gb10.serving.plugins.module_utils._plan.violation")

_PITFALL_RE = re.compile(r"^(seed \d{3}: \S.*|issue \d+: \S.*|input validation)$")


def _test_names():
    names = set()
    for path in (REPO / "tests" / "unit").rglob("test_*.py"):
        names.update(re.findall(r"^\s*def (test_\w+)\(", path.read_text(encoding="utf-8"), flags=re.M))
    return names


def test_every_registered_rule_has_a_test_named_after_it():
    tests = _test_names()
    missing = [name for name in registry.names() if f"test_{name}" not in tests]
    assert missing == [], f"rules without a test named test_<rule> under tests/unit: {missing}"


def test_every_registered_rule_records_its_pitfall():
    wrong = {name: r.pitfall for name, r in registry.RULES.items() if not _PITFALL_RE.match(r.pitfall)}
    assert wrong == {}, "pitfall must be 'seed NNN: <section>', 'issue NN: <item>' or 'input validation'"


def test_both_planners_register_their_rules():
    assert {r.planner for r in registry.RULES.values()} == {"serving", "proxy_vip"}
    assert {"profile_missing", "memory_headroom", "tp_node_ip", "vip_subnet"} <= set(registry.names())


def test_a_violation_of_an_unregistered_rule_is_a_bug():
    with pytest.raises(ValueError, match="unregistered rule 'no_such_rule'"):
        violation_mod.violation("all", "no_such_rule", None, "text")


def test_a_rule_produces_violations_of_its_own_name_only():
    @registry.rule("registry_selftest", pitfall="input validation", planner="selftest")
    def _lying(ctx):
        yield violation_mod.violation("all", "profile_missing", None, "not mine")

    try:
        with pytest.raises(ValueError, match="'registry_selftest' produced a violation of 'profile_missing'"):
            registry.run(None, planner="selftest")
    finally:
        del registry.RULES["registry_selftest"]


def _trees():
    return {path: ast.parse(path.read_text(encoding="utf-8")) for path in sorted((REPO / "plugins").rglob("*.py"))}


def _rule_positions(trees):
    """{function name: index of its ``rule`` (or ``rule_name``) parameter}: violation() and every helper under
    plugins/ that builds one (checks.refuse, checks.each_node, a rules module's own, ...)."""
    positions = {}
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                params = [arg.arg for arg in node.args.posonlyargs + node.args.args]
                named = [p for p in ("rule", "rule_name") if p in params]
                if named:
                    positions[node.name] = params.index(named[0])
    return positions


def test_every_rule_name_written_in_the_plugins_is_registered_and_every_rule_names_itself():
    # Static: the rule of every violation(...) call, and of every call of a helper that builds one (refuse,
    # unmatched, each_node, ...), anywhere under plugins/ is a registered name, and every registered rule is written
    # as one: a rule renamed on one side only, or one that names no violation of its own, shows before any plan runs.
    trees = _trees()
    positions = _rule_positions(trees)
    assert {"violation", "refuse", "refuse_given", "unmatched", "each_node"} <= set(positions)
    written = {}
    for path, tree in trees.items():
        for call in ast.walk(tree):
            if not isinstance(call, ast.Call):
                continue
            at = positions.get(getattr(call.func, "id", getattr(call.func, "attr", None)))
            if at is None:
                continue
            args = [*call.args[at : at + 1], *(k.value for k in call.keywords if k.arg in ("rule", "rule_name"))]
            for arg in args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    written.setdefault(arg.value, str(path.relative_to(REPO)))
    assert {name: where for name, where in written.items() if name not in registry.RULES} == {}
    assert [name for name in registry.names() if name not in written] == []


def test_a_broken_plan_names_registered_rules_only():
    profile = tp(image__ref="x:latest", max_jobs=None, context_length=0, env={"RAY_memory_monitor_refresh_ms": "1"})
    result = run(profile)
    assert len(result["violations"]) >= 5
    assert {v["rule"] for v in result["violations"]} <= set(registry.RULES)
    assert all(v["rule"] in registry.RULES for v in plan_mod.plan(None, {}, nodes())["violations"])


def test_readme_example_rule_is_the_registered_one():
    # README "Contributing: adding a plan rule" shows a real rule and its test, word for word.
    section = (REPO / "README.md").read_text(encoding="utf-8").split("## Contributing: adding a plan rule", 1)[1]
    rule_code, test_code = re.findall(r"```python\n(.*?)```", section, flags=re.S)[:2]
    name = re.search(r'@rule\("(\w+)"', rule_code).group(1)
    assert rule_code in (REPO / "plugins/module_utils/_plan/rules_inputs.py").read_text(encoding="utf-8")
    tests = REPO / "tests/unit/plugins/module_utils/_plan/test_rules_inputs.py"
    assert test_code in tests.read_text(encoding="utf-8")
    assert name in registry.RULES and f"def test_{name}(" in test_code
