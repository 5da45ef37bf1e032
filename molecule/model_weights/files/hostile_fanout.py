"""A hostile end of the model_weights fan-out (roles/weights_transfer/files/weights_transfer.py), for the tests.

  send   a hostile SENDER: listens like ``weights_transfer.py serve`` and speaks its wire protocol (our nonce line,
         the receiver's ``{"nonce", "proof", "want"}`` line, our ``{"proof"}`` line, then a tar stream), one
         attack per connection, in the order given; prints one JSON line a connection (what the receiver sent, what
         was sent to it) and exits 0 once every attack had its connection (3 when one never came)
  probe  a hostile RECEIVER: connects to a serving node as a receiver would, answers a challenge if one comes, and
         prints one JSON line with every byte it got (``received_bytes``)

Attacks of ``send`` (the receiver must refuse every one but ``control`` and write nothing outside its cache):
  guess    without the run's token: proves a token of its own, then sends the ``esc`` members
  reflect  without the run's token: sends the receiver's own proof back as its proof, then the ``esc`` members
  esc      with the token (a compromised peer): ``blobs/esc -> <victim>``, then ``blobs/esc/pwned.txt``
  dotdot   with the token: ``blobs/../../(...)/<victim>/pwned-dotdot.txt``
  outside  with the token: the first wanted blob (proven, so it may land), then ``snapshots/<rev>/pwned-outside.py``,
           a path the manifest does not have
  control  with the token: exactly what a real serve sends (the wanted blobs, then the snapshot's links), so a
           refusal of the others is their attack's doing, not a protocol this script gets wrong

Standard library only: it runs in a third container of any image with python3. The blobs it knows are the
``--file PATH=TEXT`` contents, named by their sha256 (the tests' manifests list them as LFS files).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import io
import json
import os
import secrets
import socket
import sys
import tarfile
import time

ATTACKS = ("guess", "reflect", "esc", "dotdot", "outside", "control")
WITHOUT_TOKEN = ("guess", "reflect")


def proof(token, role, nonce):
    """weights_transfer.py's _proof: the HMAC-SHA256 of ``gb10-weights:<role>:<nonce>`` under the run's token."""
    return hmac.new(token.encode(), f"gb10-weights:{role}:{nonce}".encode(), hashlib.sha256).hexdigest()


def hf_link(path, blob):
    """The snapshot link weights_transfer.py's hf_link makes (and its receive accepts): relative, into blobs/."""
    return os.path.relpath(os.path.join("blobs", blob), os.path.join("snapshots", "rev", os.path.dirname(path)))


def regular(name, data):
    member = tarfile.TarInfo(name)
    member.size, member.mode, member.mtime = len(data), 0o644, int(time.time())
    return member, data


def symlink(name, target):
    member = tarfile.TarInfo(name)
    member.type, member.linkname, member.mtime = tarfile.SYMTYPE, target, int(time.time())
    return member, None


def members(attack, args, files, want):
    """The tar members [(TarInfo, bytes | None)] the attack sends to a receiver that asked for ``want``."""
    victim = args.victim.rstrip("/")
    escape = [symlink("blobs/esc", victim), regular("blobs/esc/pwned.txt", b"pwned by a hostile sender\n")]
    if attack in ("guess", "reflect", "esc"):
        return escape
    if attack == "dotdot":
        return [regular("blobs/" + "../" * 16 + victim.lstrip("/") + "/pwned-dotdot.txt", b"pwned\n")]
    wanted = [path for path in sorted(want) if path in files]
    if attack == "outside":
        first = [regular(f"blobs/{files[wanted[0]][0]}", files[wanted[0]][1])] if wanted else []
        return [*first, regular(f"snapshots/{args.revision}/pwned-outside.py", b"import os  # pwned\n")]
    sent, out = set(), []
    for path in wanted:  # control: weights_transfer.py's send_snapshot, from --file
        blob, data = files[path]
        if blob not in sent:
            out.append(regular(f"blobs/{blob}", data))
            sent.add(blob)
    for path, (blob, _data) in sorted(files.items()):
        out.append(symlink(f"snapshots/{args.revision}/{path}", hf_link(path, blob)))
    return out


def read_line(reader):
    line = reader.readline(16 << 20)
    if not line.endswith(b"\n"):
        raise ConnectionError("the receiver closed or sent no complete line")
    return json.loads(line)


def drain(conn, seconds):
    """Wait (up to ``seconds``) for the other end to hang up; how it did."""
    conn.settimeout(seconds)
    try:
        while conn.recv(65536):
            pass
        return "eof"
    except ConnectionResetError:
        return "reset"
    except TimeoutError:
        return "timeout"
    except OSError as exc:
        return f"error: {exc}"


def one_sender(conn, peer, attack, args, files, token):
    record = {"attack": attack, "peer": peer[0], "want": None, "receiver_proved": None, "sent": [], "error": None}
    conn.settimeout(args.timeout)
    try:
        with conn.makefile("rb") as reader:
            nonce = secrets.token_hex(16)  # what weights_transfer.py's server_handshake sends first
            conn.sendall(json.dumps({"nonce": nonce}).encode() + b"\n")
            hello = read_line(reader)
        record["want"] = hello.get("want")
        if attack in WITHOUT_TOKEN:
            mine = hello.get("proof", "") if attack == "reflect" else proof(args.guess, "serve", hello.get("nonce"))
        else:
            record["receiver_proved"] = hmac.compare_digest(
                str(hello.get("proof", "")).encode(), proof(token, "receive", nonce).encode()
            )
            mine = proof(token, "serve", str(hello.get("nonce", "")))
        conn.sendall(json.dumps({"proof": mine}).encode() + b"\n")
        with conn.makefile("wb") as writer, tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as tar:
            for member, data in members(attack, args, files, record["want"] or []):
                tar.addfile(member, io.BytesIO(data) if data is not None else None)
                record["sent"].append(member.name)
        conn.shutdown(socket.SHUT_WR)
    except (OSError, ValueError) as exc:  # the receiver hung up on what it refused
        record["error"] = f"{type(exc).__name__}: {exc}"
    record["hangup"] = drain(conn, args.timeout)
    return record


def send(args):
    files = {}
    for item in args.file or []:
        path, _eq, text = item.partition("=")
        data = text.encode()
        files[path] = (hashlib.sha256(data).hexdigest(), data)
    token = os.environ.get(args.token_env, "") if args.token_env else ""
    if any(attack not in WITHOUT_TOKEN for attack in args.attack) and len(token) < 16:
        print(f"send: attacks {args.attack} need the run's token in ${args.token_env}", file=sys.stderr)
        return 2
    listener = socket.create_server((args.bind, args.port), reuse_port=True)
    listener.settimeout(args.accept_timeout)
    print(json.dumps({"listening": f"{args.bind}:{args.port}", "attacks": args.attack}), flush=True)
    for attack in args.attack:
        try:
            conn, peer = listener.accept()
        except TimeoutError:
            print(json.dumps({"attack": attack, "error": f"no receiver came in {args.accept_timeout:g} s"}), flush=True)
            return 3
        with conn:
            print(json.dumps(one_sender(conn, peer, attack, args, files, token)), flush=True)
    return 0


def probe(args):
    """Connect as a receiver would; every byte the server sends counts (a listed peer gets a nonce line first)."""
    deadline, record = time.time() + args.connect_timeout, {"connected": False, "received_bytes": 0, "first": ""}
    while True:
        try:
            conn = socket.create_connection((args.host, args.port), timeout=5)
            break
        except OSError as exc:
            if time.time() > deadline:
                record["error"] = f"{type(exc).__name__}: {exc}"
                print(json.dumps(record), flush=True)
                return 3
            time.sleep(0.5)
    record["connected"] = True
    got = b""
    with conn:
        conn.settimeout(args.timeout)
        try:
            # The hello a receiver sends once challenged, sent at once: a proof of no token, asking for everything.
            conn.sendall(json.dumps({"nonce": secrets.token_hex(16), "proof": "0" * 64, "want": []}).encode() + b"\n")
            while chunk := conn.recv(65536):
                got += chunk
            record["ended"] = "eof"
        except ConnectionResetError:
            record["ended"] = "reset"
        except TimeoutError:
            record["ended"] = "timeout"
        except OSError as exc:
            record["ended"] = f"error: {exc}"
    record["received_bytes"], record["first"] = len(got), got[:200].decode("latin-1")
    print(json.dumps(record), flush=True)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sender = sub.add_parser("send")
    sender.add_argument("--bind", default="0.0.0.0")
    sender.add_argument("--port", type=int, required=True)
    sender.add_argument("--attack", action="append", choices=ATTACKS, required=True)
    sender.add_argument("--token-env", help="the environment variable that holds the run's token (a compromised peer)")
    sender.add_argument("--guess", default="not-the-run-token-0000000000000000", help="the token a stranger proves")
    sender.add_argument("--revision", required=True)
    sender.add_argument("--file", action="append", help="PATH=TEXT of the manifest (blob: the text's sha256)")
    sender.add_argument("--victim", default="/victim", help="where the escapes point")
    sender.add_argument("--timeout", type=float, default=20)
    sender.add_argument("--accept-timeout", type=float, default=90)
    prober = sub.add_parser("probe")
    prober.add_argument("--host", required=True)
    prober.add_argument("--port", type=int, required=True)
    prober.add_argument("--timeout", type=float, default=10)
    prober.add_argument("--connect-timeout", type=float, default=60)
    args = parser.parse_args(argv)
    return {"send": send, "probe": probe}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
