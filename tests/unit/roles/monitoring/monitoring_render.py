# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/monitoring's templates rendered from its defaults and a small serving plan, for its unit tests; and the
real promtool (Debian's prometheus package, what the Prometheus node runs) on what they render."""

from __future__ import annotations

import shutil
from pathlib import Path

import jinja2
import pytest
import yaml
from ansible.plugins.filter.core import FilterModule as CoreFilters

from ansible_collections.gb10.serving.plugins.module_utils import _monitoring

ROLE = Path(__file__).resolve().parents[4] / "roles" / "monitoring"
NEEDS_PROMTOOL = pytest.mark.skipif(
    not shutil.which("promtool"),
    reason="needs promtool (apt-get install --no-install-recommends prometheus: Debian's 2.42; scripts/host_setup.sh)",
)
PLAN = {
    "profile": "pair",
    "serving_hosts": ["spark-1", "spark-2"],
    "nodes": {"spark-1": {"port": 8000}, "spark-2": {"port": 8000}},
}
ADDRESSES = {"spark-1": "10.77.0.11", "spark-2": "10.77.0.12"}


def variables(**overrides):
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    # the plain values of vars/main.yml (paths, job names) as written; the derived ones as the role derives them
    plain = {k: v for k, v in role_vars.items() if not (isinstance(v, str) and "{{" in v)}
    values = {
        **defaults,
        **plain,
        "ansible_managed": "Ansible managed",
        "inventory_hostname": "spark-1",
        "_monitoring_servers": ["spark-1"],
        "_monitoring_targets": _monitoring.targets(PLAN, ADDRESSES, defaults["monitoring_node_exporter_port"], {}),
        "_monitoring_exporter_listen": "10.77.0.11:9100",
        "_monitoring_prometheus_args": [
            "--config.file=/etc/prometheus/prometheus.yml",
            "--web.listen-address=10.77.0.11:9090",
            f"--storage.tsdb.retention.time={defaults['monitoring_retention_time']}",
        ],
    }
    values.update(overrides)
    return values


def render(template, **overrides):
    # trim_blocks and keep_trailing_newline: as Ansible's template module renders
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(ROLE / "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(CoreFilters().filters())
    return env.get_template(template).render(**variables(**overrides))


def write_config(folder, **overrides):
    """prometheus.yml, rules and targets rendered into ``folder``, the config pointing at them there."""
    folder = Path(folder)
    conf_dir = folder / "gb10"
    conf_dir.mkdir(exist_ok=True)
    paths = {"_monitoring_conf_dir": str(conf_dir), "_monitoring_rules_file": str(conf_dir / "rules.yml"), **overrides}
    (conf_dir / "rules.yml").write_text(render("rules.yml.j2", **paths))
    for job in variables()["_monitoring_jobs"]:
        (conf_dir / f"{job}.yml").write_text(render("targets.yml.j2", item=job, **paths))
    config = folder / "prometheus.yml"
    config.write_text(render("prometheus.yml.j2", **paths))
    return config, conf_dir / "rules.yml"
