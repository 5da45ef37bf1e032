#!/usr/bin/env bash
# ansible-test sanity of this collection, every test for Python 3.11 (the controller's), with no container.
# ansible-test insists on running from a directory whose real path ends in ansible_collections/gb10/serving, and the
# checkout's own collections/ link does not count (os.getcwd() resolves links): the tracked and untracked, not ignored
# files are copied into a throwaway tree (so no .venv, collections/, sim/build or .cache), the third-party collections
# of `make collections` are linked next to it, and the run happens there. Any finding, and any sanity test that
# ansible-test skips (a missing tool), fails the run. Prints its wall time.
# Usage: scripts/sanity.sh [ansible-test sanity options, e.g. --test validate-modules]   (after `make collections`)
set -euo pipefail
started=$(date +%s)
repo=$(cd "$(dirname "$0")/.." && pwd)
ansible_test="$repo/.venv/bin/ansible-test"
third_party="$repo/collections/ansible_collections"

die() { printf 'sanity: %s\n' "$*" >&2; exit 2; }
[ -x "$ansible_test" ] || die "no $ansible_test: run make collections first"
if [ ! -d "$third_party/community" ] || [ ! -d "$third_party/ansible" ]; then
  die "no $third_party: run make collections first"
fi
# ansible-test would skip the shellcheck test with a warning; a skipped test is not a pass.
command -v shellcheck >/dev/null || die "shellcheck is not installed (apt-get install shellcheck)"

# ansible-test builds one virtual environment per sanity test (pinned requirements from PyPI, cached in
# ~/.ansible/test/venv) and seeds each with pip from a bootstrap script it downloads from
# ci-files.testing.ansible.com, which this network does not reach. Where that script is not cached yet, cache a
# stand-in with the same effect: the interpreter's own bundled pip (ensurepip, offline) installs the pip version
# ansible-test asks for from the configured index.
pip_version=$(sed -n "s/^ *pip='\([0-9.]*\)',\$/\1/p" \
  "$("$repo/.venv/bin/python" -c 'import ansible_test, os; print(os.path.dirname(ansible_test.__file__))')/_internal/python_requirements.py")
[ -n "$pip_version" ] || die "cannot read the pip version ansible-test bootstraps"
get_pip="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
if [ ! -s "$get_pip" ]; then
  mkdir -p "$(dirname "$get_pip")"
  cat >"$get_pip.tmp" <<'PY'
"""Stand-in for ansible-test's get-pip bootstrap script (ci-files.testing.ansible.com is unreachable), written by
gb10.serving scripts/sanity.sh. ansible-test runs it inside a new virtual environment made without pip, as
`python get_pip.py [pip options] pip==VERSION [--no-setuptools] [--no-wheel]`: the standard library's bundled pip
is installed first (offline), then it installs the pip that ansible-test asked for from the configured index."""

import subprocess
import sys

args = [arg for arg in sys.argv[1:] if arg not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", *args])
PY
  mv "$get_pip.tmp" "$get_pip"
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gb10-sanity.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tree="$tmp/ansible_collections/gb10/serving"
mkdir -p "$tree"
ln -s "$third_party/community" "$third_party/ansible" "$tmp/ansible_collections/"
(
  cd "$repo"
  # Tracked files deleted in the working tree are left out; what is there is copied as it is (uncommitted edits too).
  git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' path; do
    if [ -e "$path" ] || [ -L "$path" ]; then printf '%s\0' "$path"; fi
  done | tar --null --no-recursion -T - -cf -
) | tar -xf - -C "$tree"
for ignored in .venv collections sim/build .cache; do
  [ ! -e "$tree/$ignored" ] || die "the copy holds $ignored (force-added to git?)"
done

log="$tmp/sanity.log"
set +e
(cd "$tree" && "$ansible_test" sanity --python 3.11 --local --color no "$@") 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -eq 0 ] && grep -q 'Skipping sanity test' "$log"; then
  echo "sanity: ansible-test skipped a test (see the warnings above); a skipped test is not a pass" >&2
  rc=1
fi
secs=$(($(date +%s) - started))
printf 'sanity: %s in %d s (%d:%02d)\n' "$([ "$rc" -eq 0 ] && echo ok || echo "FAILED (rc=$rc)")" \
  "$secs" $((secs / 60)) $((secs % 60))
exit "$rc"
