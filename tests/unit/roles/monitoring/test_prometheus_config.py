# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/monitoring's prometheus.yml, targets, rules and flags, rendered from its defaults and a serving plan, and
checked by the real promtool as the role's template validate: does."""

from __future__ import annotations

import re
import shlex
import subprocess

import yaml
from monitoring_render import NEEDS_PROMTOOL, ROLE, render, variables, write_config


def promtool(*args):
    return subprocess.run(["promtool", *map(str, args)], capture_output=True, text=True, check=False)


def test_every_template_starts_with_ansible_managed():
    for template in sorted(p.name for p in (ROLE / "templates").iterdir()):
        assert render(template, item="vllm").startswith("#\n# Ansible managed"), template


def test_pitfall_metrics_through_proxy_every_replica_is_its_own_target(tmp_path):
    # Seed 002: counters read through the proxy jumped between replicas. The vllm job's targets are each replica's
    # own address and port; the proxy's port 8080 is no target.
    config = write_config(tmp_path)[0]
    jobs = {job["job_name"]: job for job in yaml.safe_load(config.read_text())["scrape_configs"]}
    assert sorted(jobs) == ["haproxy", "node", "vllm"]
    vllm = yaml.safe_load((tmp_path / "gb10" / "vllm.yml").read_text())
    assert [t["targets"] for t in vllm] == [["10.77.0.11:8000"], ["10.77.0.12:8000"]]
    assert all(":8080" not in (tmp_path / "gb10" / f"{job}.yml").read_text() for job in jobs)
    assert jobs["vllm"]["file_sd_configs"] == [{"files": [str(tmp_path / "gb10" / "vllm.yml")]}]


@NEEDS_PROMTOOL
def test_prometheus_yml_passes_promtool_check_config(tmp_path):
    config = write_config(tmp_path)[0]
    checked = promtool("check", "config", config)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "WARNING" not in checked.stdout + checked.stderr


@NEEDS_PROMTOOL
def test_rules_pass_promtool_check_rules(tmp_path):
    rules = write_config(tmp_path)[1]
    checked = promtool("check", "rules", rules)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert re.search(r"SUCCESS: 11 rules found", checked.stdout), checked.stdout


@NEEDS_PROMTOOL
def test_a_broken_rule_is_refused_by_the_same_check(tmp_path):
    rules = write_config(tmp_path, monitoring_rate_window="1 minute")[1]
    assert promtool("check", "rules", rules).returncode != 0


def test_flags_bind_the_fabric_address_and_keep_the_retention(tmp_path):
    text = render("prometheus.default.j2")
    args = shlex.split(re.search(r"^ARGS=(.*)$", text, re.M).group(1))[0].split()
    assert "--web.listen-address=10.77.0.11:9090" in args
    assert f"--storage.tsdb.retention.time={variables()['monitoring_retention_time']}" in args
    exporter = render("prometheus-node-exporter.default.j2")
    assert 'ARGS="--web.listen-address=10.77.0.11:9100"' in exporter
    # the role's validate: of both files, as Debian's units read them
    check = variables()["_monitoring_args_check"]
    for name, content in (("prometheus", text), ("exporter", exporter), ("empty", 'ARGS=""\n')):
        path = tmp_path / name
        path.write_text(content)
        ran = subprocess.run(shlex.split(check % path), capture_output=True, text=True, check=False)
        assert (ran.returncode == 0) == (name != "empty"), (name, ran.stderr)
