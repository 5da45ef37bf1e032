# Copyright: gb10.serving maintainers
# Apache-2.0
"""sim/tls.py: the simulation's CA and per-subnet proxy certificate, made with openssl, kept while valid, and naming
every address inventories/sim gives the proxies' clients (each proxy node's fabric address, the floating address)
for `make sim`'s subnet and molecule default's alike; the inventory points at the files it writes."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "sim" / "tls.py"


def make(folder, base="10.77.0", nodes=2):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--dir", str(folder), "--subnet-base", base, "--nodes", str(nodes)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def names(pem):
    text = subprocess.run(
        ["openssl", "x509", "-noout", "-ext", "subjectAltName", "-in", str(pem)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {part.strip().replace("IP Address:", "IP:") for part in text.splitlines()[-1].split(",")}


def verifies(ca, pem):
    argv = ["openssl", "verify", "-CAfile", str(ca), "-purpose", "sslserver", str(pem)]
    return subprocess.run(argv, capture_output=True, text=True, check=False).returncode == 0


def test_made_once_with_every_address_root_only_keys_and_kept_while_valid(tmp_path):
    out = make(tmp_path)
    ca, key, pem = tmp_path / "ca.pem", tmp_path / "ca.key", tmp_path / "10.77.0" / "proxy.pem"
    assert "ca.pem made (missing)" in out and "proxy.pem made (missing)" in out, out
    assert names(pem) == {"IP:10.77.0.10", "IP:10.77.0.11", "IP:10.77.0.12", "DNS:spark-1", "DNS:spark-2"}
    assert verifies(ca, pem)
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in (ca, key, pem)} == {
        "ca.pem": 0o644,
        "ca.key": 0o600,
        "proxy.pem": 0o600,
    }
    text = pem.read_text()
    assert text.index("BEGIN CERTIFICATE") < text.index("BEGIN PRIVATE KEY")  # HAProxy's crt: certificate, then key
    before = {p: p.read_bytes() for p in (ca, key, pem)}
    assert make(tmp_path).count(" kept") == 2
    assert {p: p.read_bytes() for p in before} == before

    # A third node is named too (sim/up.sh SIM_NODES=3); the CA stays.
    assert "it does not name DNS:spark-3, IP:10.77.0.13" in make(tmp_path, nodes=3)
    assert "IP:10.77.0.13" in names(pem) and ca.read_bytes() == before[ca]
    # Another subnet (a molecule scenario) gets its own certificate from the same CA.
    make(tmp_path, base="10.78.0")
    assert verifies(ca, tmp_path / "10.78.0" / "proxy.pem") and ca.read_bytes() == before[ca]


def test_a_broken_certificate_or_a_new_ca_is_made_again(tmp_path):
    make(tmp_path)
    ca, pem = tmp_path / "ca.pem", tmp_path / "10.77.0" / "proxy.pem"
    pem.write_text(pem.read_text().split("-----BEGIN PRIVATE KEY-----")[0])  # the key lost
    assert "proxy.pem made (its certificate does not match its key" in make(tmp_path)
    assert verifies(ca, pem)
    ca.unlink()
    out = make(tmp_path)
    assert "ca.pem made (missing)" in out and "proxy.pem made (not issued by the simulation's CA" in out, out
    assert verifies(ca, pem)


def test_a_subnet_base_that_is_no_address_is_refused(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--dir", str(tmp_path), "--subnet-base", "10.77"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1 and "the simulation's TLS material" in done.stderr, done.stderr


@pytest.mark.parametrize("base", ["10.77.0", "10.78.0"], ids=["make sim", "molecule default"])
def test_the_certificate_names_every_address_the_inventory_gives_clients(tmp_path, base):
    """What inventories/sim resolves to on that subnet (the molecule default scenario links its group_vars and
    host_vars): every gb10_proxy node's gb10_fabric_address and proxy_vip_address are in the certificate sim/up.sh
    makes for it, and proxy_tls_cert_src / proxy_tls_ca name the files sim/tls.py writes."""
    make(tmp_path, base=base)
    env = {
        **os.environ,
        "SIM_SUBNET_BASE": base,
        "GB10_SIM_TLS_DIR": str(tmp_path),
        "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": str(REPO / "collections"),
        "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
        "ANSIBLE_DEPRECATION_WARNINGS": "0",
    }
    message = (
        "{{ {'address': gb10_fabric_address, 'vip': proxy_vip_address, 'src': proxy_tls_cert_src,"
        " 'ca': proxy_tls_ca} | to_json }}"
    )
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "ansible"),
            *("gb10_proxy", "-i", str(REPO / "inventories" / "sim"), "-m", "ansible.builtin.debug"),
            *("-a", f"msg={message}"),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    hosts = json.loads(done.stdout)["plays"][0]["tasks"][0]["hosts"]
    seen = {host: json.loads(result["msg"]) for host, result in hosts.items()}
    assert sorted(seen) == ["spark-1", "spark-2"]
    pem = tmp_path / base / "proxy.pem"
    held = names(pem)
    for host, found in seen.items():
        assert f"IP:{found['address']}" in held and f"IP:{found['vip']}" in held, (host, found, held)
        assert (found["src"], found["ca"]) == (str(pem), str(tmp_path / "ca.pem")), found
