#!/usr/bin/env bash
# make constraints: rewrites constraints.txt, every package of a fresh venv built from requirements.txt alone,
# pinned == (pip freeze), so two fresh machines install the same set (pip install -r requirements.txt -c
# constraints.txt). The venv is built with Python 3.11, the oldest the Makefile accepts, so no pin needs a newer
# one; the new file is then resolved, binary wheels only, for 3.11, 3.12 and 3.13, and everything each resolves
# must be pinned in it. Run it after editing requirements.txt. Only the package index is read (PIP_INDEX_URL where
# one is set, else PyPI): this machine's pip.conf, find-links and constraints must not shape a file every machine
# uses. Env: CONSTRAINTS_PYTHON (default python3.11).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${CONSTRAINTS_PYTHON:-python3.11}
versions=(3.11 3.12 3.13)
unset PIP_CONSTRAINT PIP_FIND_LINKS PIP_EXTRA_INDEX_URL PIP_REQUIRE_VIRTUALENV
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1

command -v "$python" >/dev/null || { echo "constraints: $python not found: set CONSTRAINTS_PYTHON=<a Python 3.11>" >&2; exit 1; }
"$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
  || { echo "constraints: $python is not Python 3.11: set CONSTRAINTS_PYTHON=<a Python 3.11>" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "constraints: a fresh venv from requirements.txt ($("$python" -V))"
"$python" -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q -r requirements.txt
{
  echo "# Every package of a fresh venv built from requirements.txt (Python 3.11), pinned: written by scripts/constraints.sh"
  echo "# (make constraints), never by hand; checked to resolve, binary wheels only, on Python ${versions[*]}."
  "$tmp/venv/bin/pip" freeze
} >"$tmp/constraints.txt"

for v in "${versions[@]}"; do
  "$tmp/venv/bin/pip" install -q --dry-run --ignore-installed --only-binary=:all: --python-version "$v" \
    --target "$tmp/target-$v" --report "$tmp/report-$v.json" -r requirements.txt -c "$tmp/constraints.txt"
  # Every package resolved must be one of the pins (fewer is fine: an environment marker may leave one out).
  "$tmp/venv/bin/python" - "$v" "$tmp/report-$v.json" "$tmp/constraints.txt" <<'PY'
import json, re, sys

def key(name, version):
    return f"{re.sub(r'[-_.]+', '-', name).lower()}=={version}"

version, report, constraints = sys.argv[1:]
pins = {key(*line.strip().split("==")) for line in open(constraints) if line.strip() and not line.startswith("#")}
got = {key(i["metadata"]["name"], i["metadata"]["version"]) for i in json.load(open(report))["install"]}
if got - pins:
    sys.exit(f"constraints: on Python {version} these are not pinned by the 3.11 venv: {sorted(got - pins)}")
left = f", {len(pins - got)} pins not needed there: {sorted(pins - got)}" if pins - got else ""
print(f"constraints: Python {version} resolves {len(got)} packages, all pinned{left}")
PY
done
if cmp -s "$tmp/constraints.txt" constraints.txt; then
  echo "constraints: constraints.txt is unchanged"
else
  cp "$tmp/constraints.txt" constraints.txt
  echo "constraints: wrote constraints.txt ($(grep -vc '^#' constraints.txt) pins)"
fi
