#!/usr/bin/env python
# Copyright: gb10.serving maintainers
# Apache-2.0
"""Ask a served site with the official openai client, through its proxy, and read each replica's own /metrics.

Run it with the Python of real_venv.sh's venv (vLLM's own openai, httpx and prometheus_client). The checks are
serve_real.py's (models, a completion, a streamed chat completion, a named tool call of a strict function), made
at the proxy's TLS address verified against the site's CA; then vLLM's /metrics of every replica, read directly
(never through the proxy: seed 002's jumping counters). Prints one line per check; exits 1 when one fails.
"""

from __future__ import annotations

import argparse
import sys

import serve_real


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proxy", required=True, help="https://ADDRESS:PORT of the proxy")
    parser.add_argument("--ca", required=True, help="the CA the proxy's certificate is checked against")
    parser.add_argument("--key", required=True, help="the site's API key")
    parser.add_argument("--model", required=True, help="the served model name")
    parser.add_argument("--replica", action="append", default=[], help="http://ADDRESS:PORT of a replica (repeat)")
    args = parser.parse_args(argv)
    checks = serve_real.ask(args.proxy, args.key, args.model, ca=args.ca, metrics_bases=args.replica or None)
    for name, ok, detail in checks:
        print(f"[ask-site] {'ok' if ok else 'FAILED'} {args.proxy}: {name}: {detail}", flush=True)
    return 0 if all(ok for _name, ok, _detail in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
