#!/usr/bin/env python
# Copyright: gb10.serving maintainers
# Apache-2.0
"""The simulation's TLS material, made with openssl on the controller (sim/up.sh runs this before the nodes start).

    sim/tls.py --dir sim/build/tls --subnet-base 10.77.0 --nodes 2

- ``DIR/ca.pem`` (0644) and ``DIR/ca.key`` (0600): the simulation's own CA, one for every simulation of this checkout.
  inventories/sim gives ca.pem as ``proxy_tls_ca``: the collection's clients (the floating-address check, bench.yml,
  the molecule verify) and every client of the served-site suite verify the proxy's certificate against it.
- ``DIR/<subnet base>/proxy.pem`` (0600): the proxy's certificate and its private key in one PEM (HAProxy's ``crt``),
  issued by that CA, one per subnet (``make sim``, each molecule scenario and the suite's own simulation have their
  own). inventories/sim gives it as ``proxy_tls_cert_src``. Its subjectAltNames are every address a client of that
  simulation uses: the floating proxy address (``<base>.10``, inventories/sim/group_vars/all/proxy_vip.yml) and each
  node's fabric address (``<base>.11`` on, sim/lib/common.sh node_ip; at least two, the gb10_proxy nodes), and the
  nodes' names on the network (``spark-N``).

Idempotent: a file that is present and valid is kept. The CA is made again only when it is missing, does not match its
key, is no CA, or expires within 30 days; the certificate only when it is missing, does not match its key, is not
issued by the CA (a new CA re-issues it), expires within 30 days, or does not name every address above. Prints what
it kept or made, one line each.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path

# Floating proxy address and first node at <base>.(10 + N) (sim/lib/common.sh, inventories/sim).
VIP_HOST = 10
CA_DAYS = 3650
CERT_DAYS = 825
RENEW_BEFORE_S = 30 * 86400
CA_SUBJECT = "/O=gb10.serving simulation/CN=gb10 simulation CA"

_CONFIG = """\
[req]
distinguished_name = dn
prompt = no
[dn]
[ca]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
subjectAltName = {sans}
"""


def say(message):
    print(f"[sim] tls: {message}", flush=True)


def subject_alt_names(subnet_base, nodes):
    """Every name a client of the simulation on ``subnet_base`` uses for the proxy, in openssl's notation."""
    ipaddress.IPv4Address(f"{subnet_base}.0")  # a bad base is refused here, not by openssl
    count = max(int(nodes), 2)
    addresses = [f"{subnet_base}.{VIP_HOST}"] + [f"{subnet_base}.{10 + i}" for i in range(1, count + 1)]
    return [f"IP:{a}" for a in addresses] + [f"DNS:spark-{i}" for i in range(1, count + 1)]


def openssl(*argv):
    """openssl's (returncode, stdout, stderr); never raises on a refusal."""
    done = subprocess.run(["openssl", *argv], capture_output=True, text=True, check=False)
    return done.returncode, done.stdout, done.stderr


def _public_key(kind, path):
    argv = ("x509", "-noout", "-pubkey") if kind == "cert" else ("pkey", "-pubout", "-passin", "pass:")
    rc, out, _err = openssl(*argv, "-in", str(path))
    return out if rc == 0 else None


def key_matches(cert, key):
    public = _public_key("cert", cert)
    return public is not None and public == _public_key("key", key)


def lasts(cert, seconds=RENEW_BEFORE_S):
    return openssl("x509", "-noout", "-checkend", str(seconds), "-in", str(cert))[0] == 0


def names_of(cert):
    """The subjectAltNames of ``cert`` in openssl's notation (IP:..., DNS:...)."""
    rc, out, _err = openssl("x509", "-noout", "-ext", "subjectAltName", "-in", str(cert))
    if rc != 0:
        return set()
    found = set()
    for kind, value in re.findall(r"(IP Address|DNS):([^,\s]+)", out):
        found.add(("IP:" if kind == "IP Address" else "DNS:") + value)
    return found


def ca_problem(directory):
    """Why the CA in ``directory`` must be made again, or None."""
    ca, key = directory / "ca.pem", directory / "ca.key"
    if not ca.is_file() or not key.is_file():
        return "missing"
    if not key_matches(ca, key):
        return "ca.pem does not match ca.key"
    if "CA:TRUE" not in openssl("x509", "-noout", "-ext", "basicConstraints", "-in", str(ca))[1]:
        return "ca.pem is no CA"
    if not lasts(ca):
        return "expires within 30 days"
    return None


def cert_problem(directory, pem, wanted):
    """Why ``pem`` (certificate and key) must be issued again, or None."""
    if not pem.is_file():
        return "missing"
    if not key_matches(pem, pem):
        return "its certificate does not match its key (or it holds no key)"
    rc, out, err = openssl("verify", "-CAfile", str(directory / "ca.pem"), "-purpose", "sslserver", str(pem))
    if rc != 0:
        return "not issued by the simulation's CA: " + ((out + err).strip().splitlines() or ["?"])[-1]
    if not lasts(pem):
        return "expires within 30 days"
    missing = sorted(set(wanted) - names_of(pem))
    if missing:
        return "it does not name " + ", ".join(missing)
    return None


def _write_private(path, text):
    """``text`` to ``path`` (0600) through a temporary file in the same folder: never a half-written PEM."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _run(argv, what):
    rc, out, err = openssl(*argv)
    if rc != 0:
        raise OSError(f"openssl could not make {what}: {(out + err).strip()}")


def make_ca(directory, scratch):
    config = scratch / "openssl.cnf"
    config.write_text(_CONFIG.format(sans="DNS:unused"))
    key, cert = scratch / "ca.key", scratch / "ca.pem"
    _run(
        [
            *("req", "-x509", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"),
            *("-config", str(config), "-extensions", "ca", "-subj", CA_SUBJECT, "-days", str(CA_DAYS)),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        "the CA",
    )
    _write_private(directory / "ca.key", key.read_text())
    (directory / "ca.pem").write_text(cert.read_text())
    os.chmod(directory / "ca.pem", 0o644)


def make_cert(directory, subnet_base, wanted, scratch):
    config = scratch / "openssl.cnf"
    config.write_text(_CONFIG.format(sans=", ".join(wanted)))
    key, request, cert = scratch / "proxy.key", scratch / "proxy.csr", scratch / "proxy.crt"
    _run(
        [
            *("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-config", str(config)),
            *("-subj", f"/O=gb10.serving simulation/CN=gb10-sim proxy {subnet_base}.{VIP_HOST}"),
            *("-keyout", str(key), "-out", str(request)),
        ],
        "the proxy's key",
    )
    _run(
        [
            *("x509", "-req", "-in", str(request), "-CA", str(directory / "ca.pem")),
            *("-CAkey", str(directory / "ca.key"), "-set_serial", "0x" + secrets.token_hex(16)),
            *("-days", str(CERT_DAYS), "-extfile", str(config), "-extensions", "server", "-out", str(cert)),
        ],
        "the proxy's certificate",
    )
    folder = directory / subnet_base
    folder.mkdir(mode=0o755, parents=True, exist_ok=True)
    _write_private(folder / "proxy.pem", cert.read_text() + key.read_text())


def ensure(directory, subnet_base, nodes):
    """The CA and the certificate of ``subnet_base``, each kept when valid; returns [(file, kept or why made)]."""
    directory = Path(directory)
    directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    wanted = subject_alt_names(subnet_base, nodes)
    pem = directory / subnet_base / "proxy.pem"
    done = []
    with tempfile.TemporaryDirectory(prefix="gb10-sim-tls-") as scratch:
        why = ca_problem(directory)
        if why:
            make_ca(directory, Path(scratch))
            done.append((directory / "ca.pem", f"made ({why})"))
        else:
            done.append((directory / "ca.pem", "kept"))
        why = cert_problem(directory, pem, wanted)
        if why:
            make_cert(directory, subnet_base, wanted, Path(scratch))
            done.append((pem, f"made ({why}) for {', '.join(wanted)}"))
        else:
            done.append((pem, "kept"))
    return done


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--dir", required=True, help="where the CA and the per-subnet certificates live")
    parser.add_argument("--subnet-base", required=True, help="the first three octets of the simulation's subnet")
    parser.add_argument("--nodes", type=int, default=2, help="how many nodes the simulation starts")
    args = parser.parse_args(argv)
    try:
        done = ensure(args.dir, args.subnet_base, args.nodes)
    except (OSError, ValueError) as problem:
        print(f"[sim] ERROR: the simulation's TLS material: {problem}", file=sys.stderr)
        return 1
    for path, what in done:
        say(f"{path} {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
