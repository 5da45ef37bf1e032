#!/usr/bin/env bash
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
#
# The collection as it is published: build the tarball from this tree (galaxy.yml's build_ignore), check that it
# holds the collection alone, install it into a scratch collections path, and have ansible-doc read every plugin
# and role of the installed copy (tests/unit/plugins/test_plugin_docs.py and tests/unit/roles/test_role_docs.py,
# pointed at that copy). Exits non-zero on any failure. KEEP=1 keeps the scratch folder.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s%N)
BIN=${BIN:-.venv/bin}

scratch=$(mktemp -d "${TMPDIR:-/tmp}/gb10-package.XXXXXX")
if [ "${KEEP:-0}" = 1 ]; then echo "package: scratch folder kept: $scratch"; else trap 'rm -rf "$scratch"' EXIT; fi
mkdir -p "$scratch/build" "$scratch/installed"
# Nothing of this checkout's ansible.cfg (collections_path = ./collections) may leak into the build or the install.
printf '[defaults]\n' >"$scratch/ansible.cfg"
export ANSIBLE_CONFIG="$scratch/ansible.cfg" ANSIBLE_COLLECTIONS_PATH="$scratch/installed"
export ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false ANSIBLE_NOCOLOR=1

"$BIN/ansible-galaxy" collection build --output-path "$scratch/build" . >"$scratch/build.log"
tarball=$(echo "$scratch"/build/gb10-serving-*.tar.gz)
[ -f "$tarball" ] || { cat "$scratch/build.log"; echo "package: no tarball built"; exit 1; }
tar -tzf "$tarball" | sed 's#/$##' | sort >"$scratch/files.txt"
echo "package: $(basename "$tarball"): $(wc -l <"$scratch/files.txt") entries, $(du -k "$tarball" | cut -f1) KiB"

failed=0
fail() {
  echo "package: FAIL: $*"
  failed=1
}

# Development only: the simulation, molecule, device probes, CI, tool chain, caches, build output.
excluded='^(sim|molecule|device|scripts|collections|out|inventories/sim|tests/integration|tests/unit/sim'
excluded+='|tests/output|changelogs/fragments)(/|$)'
excluded+='|^\.|/\.(pytest_cache|ruff_cache|hypothesis|mypy_cache|cache|venv|tox|git)(/|$)|(^|/)__pycache__(/|$)'
excluded+='|\.pyc$|(^|/)\.plugin-cache\.yaml$|\.tar\.gz$'
excluded+='|^(Makefile|ansible\.cfg|pyproject\.toml|requirements\.txt|requirements\.yml|constraints\.txt)$'
if grep -E "$excluded" "$scratch/files.txt" >"$scratch/excluded.txt"; then
  fail "the tarball holds development files:"
  sed 's/^/  /' "$scratch/excluded.txt"
fi

# What a published collection holds at its top, and nothing else (a new top-level path is a decision to make).
allowed_top=" MANIFEST.json FILES.json README.md LICENSE CHANGELOG.md changelogs docs files inventories meta playbooks"
allowed_top+=" plugins roles site.yml tests "
while read -r top; do
  [[ "$allowed_top" == *" $top "* ]] || fail "unexpected top-level entry: $top (add it to build_ignore, or here)"
done < <(cut -d/ -f1 "$scratch/files.txt" | sort -u)
for required in LICENSE README.md meta/runtime.yml meta/execution-environment.yml meta/ee-requirements.txt \
  changelogs/changelog.yaml; do
  grep -qx "$required" "$scratch/files.txt" || fail "the tarball lacks $required"
done
grep -q "Apache License" <(tar -xzOf "$tarball" LICENSE) || fail "LICENSE is not the Apache License text"

# Files git does not track would ship too (a stray log, someone's scratch file): named, not fatal.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  tar -tzf "$tarball" | grep -v '/$' | grep -vxE 'MANIFEST.json|FILES.json' | sort >"$scratch/shipped.txt"
  git ls-files | sort >"$scratch/tracked.txt"
  comm -23 "$scratch/shipped.txt" "$scratch/tracked.txt" | sed 's/^/package: note: not tracked by git: /'
fi

"$BIN/ansible-galaxy" collection install --no-deps -p "$scratch/installed" "$tarball" >"$scratch/install.log" 2>&1 ||
  {
    cat "$scratch/install.log"
    fail "ansible-galaxy collection install failed"
  }
installed="$scratch/installed/ansible_collections/gb10/serving"
[ -f "$installed/MANIFEST.json" ] || fail "nothing installed at $installed"

if [ -d "$installed/plugins" ]; then
  echo "package: ansible-doc on every plugin and role of the installed copy"
  GB10_DOCS_COLLECTIONS_PATH="$scratch/installed" "$BIN/pytest" -q -p no:cacheprovider --no-header \
    tests/unit/plugins/test_plugin_docs.py tests/unit/roles/test_role_docs.py || fail "ansible-doc on the installed copy"
fi

ms=$((($(date +%s%N) - started) / 1000000))
wall="$((ms / 1000)).$((ms % 1000 / 100)) s"
if [ "$failed" -ne 0 ]; then
  echo "package: FAILED ($wall)"
  exit 1
fi
echo "package: ok: $(basename "$tarball") holds the collection alone; ansible-doc reads every plugin and role ($wall)"
