# Copyright: gb10.serving maintainers
# Apache-2.0
"""TLS material for the unit tests (the proxy role, the load generator): the simulation's own (sim/tls.py, what
`make sim` serves) and the broken PEMs the proxy's preflight must refuse."""

from __future__ import annotations

import datetime
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SIM_TLS = REPO / "sim" / "tls.py"


def sim_tls(folder, subnet_base="10.77.0", nodes=2):
    """(ca.pem, proxy.pem) made by sim/tls.py in ``folder``, as sim/up.sh makes them."""
    subprocess.run(
        [sys.executable, str(SIM_TLS), "--dir", str(folder), "--subnet-base", subnet_base, "--nodes", str(nodes)],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(folder) / "ca.pem", Path(folder) / subnet_base / "proxy.pem"


def openssl(*argv, **kwargs):
    return subprocess.run(["openssl", *argv], check=True, capture_output=True, text=True, **kwargs).stdout


def certificate_only(pem, out):
    """``pem``'s certificate without its key."""
    Path(out).write_text(openssl("x509", "-in", str(pem)))
    return Path(out)


def with_another_key(pem, out):
    """``pem``'s certificate with a key of another certificate."""
    key = openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256")
    Path(out).write_text(openssl("x509", "-in", str(pem)) + key)
    return Path(out)


def expired(out):
    """A self-signed certificate and its key whose validity ended yesterday (openssl's CLI cannot date one back)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gb10 expired proxy")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=30))
        .not_valid_after(now - datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    Path(out).write_bytes(
        cert.public_bytes(serialization.Encoding.PEM)
        + key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return Path(out)
