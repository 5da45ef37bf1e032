# Copyright: gb10.serving maintainers
# Apache-2.0
"""roles/proxy's files in two gb10.serving.node_templates runs (tasks/configure.yml), templated by Ansible as a run
does: the root-only ones (the accepted key, the copied certificate) and the rest; and its handlers, which read what
each run wrote: HAProxy reloads for its configuration, its error page or a root-only file, systemd for the drop-in,
nothing for the clients' CA alone."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLE = Path(__file__).resolve().parents[4] / "roles" / "proxy"
CONFIGURE = yaml.safe_load((ROLE / "tasks" / "configure.yml").read_text())
HANDLERS = {h["name"]: h for h in yaml.safe_load((ROLE / "handlers" / "main.yml").read_text())}
SECRETS = next(t for t in CONFIGURE if t["name"].startswith("Write the accepted API key"))
FILES = next(t for t in CONFIGURE if t["name"].startswith("Write the state saver, haproxy.service's drop-in"))


def _templar(**given):
    role_vars = {
        **yaml.safe_load((ROLE.parent / "gb10" / "defaults" / "main.yml").read_text()),
        **yaml.safe_load((ROLE / "defaults" / "main.yml").read_text()),
        **yaml.safe_load((ROLE / "vars" / "main.yml").read_text()),
        "gb10_api_key": "sk-site",
        **given,
    }
    variables = {k: trust_as_template(v) if isinstance(v, str) else v for k, v in role_vars.items()}
    return Templar(loader=DataLoader(), variables=variables)


def _files(task, **given):
    templar = _templar(**{**given, **{k: trust_as_template(v) for k, v in task.get("vars", {}).items()}})
    return templar.template(trust_as_template(task["gb10.serving.node_templates"]["files"]))


def test_the_key_file_holds_the_bearer_line_with_a_real_line_break_and_nothing_when_anonymous():
    key = _files(SECRETS)[0]
    assert (key["dest"], key["mode"], key["content"]) == ("/etc/haproxy/gb10-api-keys", "0600", "Bearer sk-site\n")
    assert _files(SECRETS, proxy_anonymous=True)[0]["content"] == ""
    assert SECRETS["no_log"] is True


def test_the_certificate_is_copied_root_only_and_the_ca_for_the_clients_only_where_given():
    assert [f["dest"] for f in _files(SECRETS)] == ["/etc/haproxy/gb10-api-keys"]
    cert = _files(SECRETS, proxy_tls_cert_src="/ctl/proxy.pem")[1]
    assert cert == {
        "file": "/ctl/proxy.pem",
        "dest": "/etc/haproxy/gb10-tls.pem",
        "owner": "root",
        "group": "root",
        "mode": "0600",
    }
    plain = [f["dest"] for f in _files(FILES)]
    # the state saver first: the drop-in's every start and reload runs it
    assert plain == [
        "/usr/local/libexec/gb10/haproxy-save-state",
        "/etc/systemd/system/haproxy.service.d/gb10-server-state.conf",
        "/etc/haproxy/errors/gb10-503-queue.http",
        "/etc/haproxy/haproxy.cfg",
    ]
    tls = _files(FILES, proxy_tls_cert_src="/ctl/proxy.pem", proxy_tls_ca="/ctl/ca.pem")
    assert tls[2] == {
        "file": "/ctl/ca.pem",
        "dest": "/etc/haproxy/gb10-tls-ca.pem",
        "owner": "root",
        "group": "root",
        "mode": "0644",
    }
    # the error page before haproxy.cfg, whose check (validate) reads it
    assert [f["dest"] for f in tls][-2:] == ["/etc/haproxy/errors/gb10-503-queue.http", "/etc/haproxy/haproxy.cfg"]
    assert tls[-1]["validate"] == "haproxy -c -f %s"


@pytest.mark.parametrize(
    ("written", "secrets_changed", "reload_haproxy", "reload_systemd"),
    [
        ([], False, False, False),
        (["/etc/haproxy/haproxy.cfg"], False, True, False),
        (["/etc/haproxy/errors/gb10-503-queue.http"], False, True, False),
        ([], True, True, False),
        (["/etc/haproxy/gb10-tls-ca.pem"], False, False, False),
        (["/usr/local/libexec/gb10/", "/usr/local/libexec/gb10/haproxy-save-state"], False, False, False),
        (["/etc/systemd/system/haproxy.service.d/gb10-server-state.conf"], False, False, True),
    ],
)
def test_each_handler_runs_for_the_files_it_serves(written, secrets_changed, reload_haproxy, reload_systemd):
    templar = _templar(
        __proxy_files={"written": written, "changed": bool(written)}, __proxy_secret_files={"changed": secrets_changed}
    )
    assert set(FILES["notify"]) == {"Reload haproxy", "Reload systemd for haproxy"}
    assert SECRETS["notify"] == "Reload haproxy"

    def runs(name):
        return templar.evaluate_conditional(trust_as_template(HANDLERS[name]["when"]))

    assert (runs("Reload haproxy"), runs("Reload systemd for haproxy")) == (reload_haproxy, reload_systemd)
