# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/monitoring's recording rules, run by the real promtool on synthetic series (rules_test.yml): the summed
tokens/s equals the sum of the per-replica rates (issue 20's done-when), and each of seed 002's figures."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from monitoring_render import NEEDS_PROMTOOL, render

HERE = Path(__file__).resolve().parent


def rules_test(tmp_path, **overrides):
    (tmp_path / "rules.yml").write_text(render("rules.yml.j2", **overrides))
    shutil.copy(HERE / "rules_test.yml", tmp_path / "rules_test.yml")
    return subprocess.run(
        ["promtool", "test", "rules", "rules_test.yml"], cwd=tmp_path, capture_output=True, text=True, check=False
    )


@NEEDS_PROMTOOL
def test_summed_tokens_per_second_is_the_sum_of_the_replicas_and_every_figure_holds(tmp_path):
    ran = rules_test(tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "SUCCESS" in ran.stdout


@NEEDS_PROMTOOL
def test_the_unit_test_fails_when_a_rule_is_wrong(tmp_path):
    # the same test against rules whose sum leaves a replica out must fail, or it proves nothing
    wrong = render("rules.yml.j2").replace(
        'expr: sum(rate(vllm:generation_tokens_total{job="vllm"}',
        'expr: sum(rate(vllm:generation_tokens_total{job="vllm",node="spark-1"}',
    )
    assert wrong != render("rules.yml.j2")
    (tmp_path / "rules.yml").write_text(wrong)
    shutil.copy(HERE / "rules_test.yml", tmp_path / "rules_test.yml")
    ran = subprocess.run(
        ["promtool", "test", "rules", "rules_test.yml"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert ran.returncode != 0 and "gb10:vllm_generation_tokens:rate" in ran.stdout + ran.stderr
