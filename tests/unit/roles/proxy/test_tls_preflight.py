# Copyright: gb10.serving maintainers
# Apache-2.0
"""The proxy's TLS checks (roles/proxy/tasks/checks.yml, run by roles/node_preflight before any node changes and by
the role's own preflight where it did not), by the real ansible-playbook on local hosts with real PEMs and openssl.

Refused, each naming the node and the fix: a certificate path that is missing or no readable file, a PEM without a
private key or with the key of another certificate, an expired certificate (openssl x509 -checkend 0), a
certificate the given CA did not issue, a CA file the control machine lacks, a node path haproxy.cfg could not hold
as one word. Passed: the simulation's own certificate (sim/tls.py), on the node or copied from the control machine,
with or without its CA; no certificate at all (plain HTTP); a host outside gb10_proxy, whatever it is given.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from task_file_runner import run_play, run_role_tasks
from tls_material import certificate_only, expired, sim_tls, with_another_key

# The plan's part the preflight reads (roles/gb10's gb10_plan): one replica on this host, the public frontend judged
# (rules_api.py) with no violation.
PLAN = {
    "nodes": {"localhost": {"port": 8000, "max_num_seqs": 4}},
    "serving_hosts": ["localhost"],
    "api": {"key_set": True, "anonymous": False, "bind": "*", "port": 8080, "tls": False},
    "violations": [],
}


@pytest.fixture(scope="module")
def material(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tls")
    ca, pem = sim_tls(folder / "sim")
    other_ca = sim_tls(folder / "other", subnet_base="10.1.2")[0]
    return {
        "ca": str(ca),
        "pem": str(pem),
        "other_ca": str(other_ca),
        "folder": str(folder),
        "no_key": str(certificate_only(pem, folder / "no-key.pem")),
        "wrong_key": str(with_another_key(pem, folder / "wrong-key.pem")),
        "expired": str(expired(folder / "expired.pem")),
        "missing": str(folder / "missing.pem"),
    }


def cases(m):
    """{host: (its settings, the problems expected: one substring each, [] for none)}."""
    return {
        "plain-http": ({}, []),
        "on-the-node": ({"proxy_tls_cert": m["pem"]}, []),
        "on-the-node-with-its-ca": ({"proxy_tls_cert": m["pem"], "proxy_tls_ca": m["ca"]}, []),
        "copied-with-its-ca": ({"proxy_tls_cert_src": m["pem"], "proxy_tls_ca": m["ca"]}, []),
        "missing": ({"proxy_tls_cert": m["missing"]}, ["(on the node): there is no such file. Fix:"]),
        "a-directory": ({"proxy_tls_cert": m["folder"]}, ["it is not a readable file"]),
        "missing-on-the-controller": (
            {"proxy_tls_cert_src": m["missing"]},
            ["(on the control machine): there is no such file"],
        ),
        "no-key": ({"proxy_tls_cert_src": m["no_key"]}, ["it holds no unencrypted private key"]),
        "wrong-key": ({"proxy_tls_cert": m["wrong_key"]}, ["its private key is not the key of its first certificate"]),
        "expired": ({"proxy_tls_cert": m["expired"]}, ["its certificate has expired (notAfter="]),
        "another-ca": (
            {"proxy_tls_cert_src": m["pem"], "proxy_tls_ca": m["other_ca"]},
            ["it does not verify against proxy_tls_ca: error 20"],
        ),
        "ca-missing": (
            {"proxy_tls_cert_src": m["pem"], "proxy_tls_ca": m["missing"]},
            [f"proxy_tls_ca {m['missing']} is not a readable file on the control machine"],
        ),
        "path-haproxy-cannot-hold": (
            {"proxy_tls_cert": "/etc/haproxy/my cert.pem"},
            ['proxy_tls_cert "/etc/haproxy/my cert.pem" is not an absolute path', "there is no such file"],
        ),
    }


def test_every_certificate_problem_is_named_with_its_node_and_fix(tmp_path, material):
    """One play over one local host per case, as roles/node_preflight runs the checks on every node."""
    given = cases(material)
    inventory = {
        "all": {
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
            "children": {
                "gb10_proxy": {"hosts": {host: settings for host, (settings, _expected) in given.items()}},
                # Not a proxy: nothing of it is checked, whatever it is given.
                "gb10_nodes": {"hosts": {"not-a-proxy": {"proxy_tls_cert": material["missing"]}}},
            },
        }
    }
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    play = [
        {
            "hosts": "all",
            "gather_facts": False,
            "vars": {"gb10_plan": PLAN},
            "tasks": [
                {"ansible.builtin.include_role": {"name": "gb10.serving.proxy", "tasks_from": "checks"}},
                {
                    "ansible.builtin.copy": {
                        "content": "{{ dict(ansible_play_hosts | zip(ansible_play_hosts"
                        " | map('extract', hostvars, '__proxy_problems'))) | to_json }}",
                        "dest": f"{tmp_path}/problems.json",
                        "mode": "0600",
                    },
                    "run_once": True,
                },
            ],
        }
    ]
    rc, out = run_play(tmp_path, play, str(tmp_path / "hosts.yml"), env={"ANSIBLE_FORKS": "4"})
    assert rc == 0, out[-4000:]
    found = json.loads((tmp_path / "problems.json").read_text())
    for host, (_settings, expected) in {**given, "not-a-proxy": ({}, [])}.items():
        problems = found[host]
        assert len(problems) == len(expected), (host, problems)
        for problem, wanted in zip(problems, expected, strict=True):
            assert problem.startswith(f"{host}: ") and wanted in problem and "Fix:" in problem, (host, problem)
    # The key is never printed: not the PEM's, not in any problem.
    key = Path(material["pem"]).read_text().split("-----BEGIN PRIVATE KEY-----")[1].split("-----END")[0]
    assert key.strip().splitlines()[0] not in out


def test_the_role_refuses_before_it_writes_anything(tmp_path, material):
    """The role's own preflight (where roles/node_preflight did not run the checks) stops the role at its first
    task; the good certificates pass in the test above."""
    hostvars = {"gb10_fabric_address": "127.0.0.1"}
    variables = {"gb10_plan": PLAN, "gb10_api_key": "unit-key", "proxy_tls_cert_src": material["expired"]}
    rc, out = run_role_tasks(tmp_path, "proxy", "preflight", variables, name="preflight", hostvars=hostvars)
    assert rc == 2, out[-3000:]
    assert "Refuse a certificate HAProxy could not serve or clients could not verify" in out
    assert "localhost: the TLS certificate proxy_tls_cert_src " + material["expired"] in out
    assert "its certificate has expired" in out and "Fix: give one PEM" in out
