#!/usr/bin/env bash
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
#
# The changelog is antsibull-changelog's own (changelogs/config.yaml):
# - the fragments (changelogs/fragments/) and changelogs/changelog.yaml lint;
# - CHANGELOG.md is exactly what `antsibull-changelog generate` makes of changelog.yaml. antsibull-changelog has no
#   "unreleased" section and writes no changelog before a first release, so until changelog.yaml holds a release
#   there must be no CHANGELOG.md (a hand-written one would not be current);
# - the pending fragments release cleanly as galaxy.yml's version (in a scratch copy: nothing here changes).
#   PREVIEW=path writes that release's CHANGELOG.md there.
# At a release: antsibull-changelog release (galaxy.yml's version), then commit CHANGELOG.md and changelogs/.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s%N)
BIN=${BIN:-.venv/bin}
acl="$PWD/$BIN/antsibull-changelog"

"$acl" lint
"$acl" lint-changelog-yaml changelogs/changelog.yaml

scratch=$(mktemp -d "${TMPDIR:-/tmp}/gb10-changelog.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
copy="$scratch/ansible_collections/gb10/serving"
mkdir -p "$copy"
# What antsibull-changelog reads: galaxy.yml and changelogs/, and the plugins and roles (through ansible-doc) for the
# New Modules / New Plugins / New Roles sections.
cp -r galaxy.yml meta plugins roles playbooks changelogs "$copy/"
printf '[defaults]\n' >"$scratch/ansible.cfg"
export ANSIBLE_CONFIG="$scratch/ansible.cfg" ANSIBLE_COLLECTIONS_PATH="$scratch" ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false
export PATH="$PWD/$BIN:$PATH"

version=$(sed -n 's/^version: *//p' galaxy.yml)
releases=$("$BIN/python" -c 'import sys, yaml; print(len((yaml.safe_load(open(sys.argv[1])) or {}).get("releases") or {}))' \
  changelogs/changelog.yaml)
failed=0
if [ "$releases" -gt 0 ]; then
  (cd "$copy" && "$acl" generate --output "$scratch/CHANGELOG.md" --output-format md)
  if ! diff -u CHANGELOG.md "$scratch/CHANGELOG.md" >"$scratch/changelog.diff" 2>&1; then
    echo "changelog: FAIL: CHANGELOG.md is not what antsibull-changelog generate makes of changelogs/changelog.yaml:"
    head -40 "$scratch/changelog.diff"
    failed=1
  fi
elif [ -e CHANGELOG.md ]; then
  echo "changelog: FAIL: changelogs/changelog.yaml holds no release, so antsibull-changelog wrote no CHANGELOG.md;"
  echo "  this one is not generated: remove it (antsibull-changelog release writes it at the first release)"
  failed=1
fi

pending=$(find changelogs/fragments -maxdepth 1 \( -name '*.yml' -o -name '*.yaml' \) 2>/dev/null | wc -l)
if [ "$pending" -gt 0 ]; then
  # A fragment already released, or a galaxy.yml version already in changelog.yaml, fails here.
  if (cd "$copy" && "$acl" release >"$scratch/release.log" 2>&1) && [ -s "$copy/CHANGELOG.md" ]; then
    echo "changelog: $pending pending fragment(s) release cleanly as $version" \
      "($(grep -c '^\* ' "$copy/CHANGELOG.md") entries)"
    if [ -n "${PREVIEW:-}" ]; then cp "$copy/CHANGELOG.md" "$PREVIEW" && echo "changelog: preview in $PREVIEW"; fi
  else
    echo "changelog: FAIL: the pending fragments do not release as $version:"
    cat "$scratch/release.log"
    failed=1
  fi
fi

ms=$((($(date +%s%N) - started) / 1000000))
wall="$((ms / 1000)).$((ms % 1000 / 100)) s"
if [ "$failed" -ne 0 ]; then
  echo "changelog: FAILED ($wall)"
  exit 1
fi
echo "changelog: ok: fragments and changelog.yaml lint, CHANGELOG.md is current ($releases release(s)) ($wall)"
