#!/usr/bin/env bash
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
#
# The changelog is antsibull-changelog's own (changelogs/config.yaml):
# - the pending fragments (changelogs/fragments/) and changelogs/changelog.yaml lint;
# - CHANGELOG.md is exactly what `antsibull-changelog generate` makes of changelog.yaml (a hand edit fails: fix
#   the wording in changelog.yaml, or in a fragment before its release, and regenerate);
# - the pending fragments, if any, release cleanly (in a scratch copy: nothing here changes) as the next patch
#   version after the last release, or as galaxy.yml's version where that is newer. None pending passes.
#   PREVIEW=path writes that trial release's CHANGELOG.md there.
# At a release: set galaxy.yml's version, `antsibull-changelog release` (it reads that version; it finds the
# collection's plugins and roles through ansible-doc), then commit CHANGELOG.md and changelogs/.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s%N)
BIN=${BIN:-.venv/bin}
acl="$PWD/$BIN/antsibull-changelog"

failed=0
fail() {
  echo "changelog: FAIL: $*"
  failed=1
}

"$acl" lint || fail "the fragments under changelogs/fragments/ do not lint (above)"
"$acl" lint-changelog-yaml changelogs/changelog.yaml || fail "changelogs/changelog.yaml does not lint (above)"

scratch=$(mktemp -d "${TMPDIR:-/tmp}/gb10-changelog.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
copy="$scratch/ansible_collections/gb10/serving"
mkdir -p "$copy"
# What antsibull-changelog reads: galaxy.yml and changelogs/, and the plugins and roles (through ansible-doc) for the
# New Modules / New Plugins / New Roles sections. Nothing of this checkout's ansible.cfg may leak in.
cp -r galaxy.yml meta plugins roles playbooks changelogs "$copy/"
printf '[defaults]\n' >"$scratch/ansible.cfg"
export ANSIBLE_CONFIG="$scratch/ansible.cfg" ANSIBLE_COLLECTIONS_PATH="$scratch" ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false
export PATH="$PWD/$BIN:$PATH"

# The last release, the version a trial release of the pending fragments takes, and the fragments already released.
read -r last trial galaxy < <("$BIN/python" - galaxy.yml changelogs/changelog.yaml <<'PY'
import sys
import semantic_version
import yaml

galaxy = semantic_version.Version(yaml.safe_load(open(sys.argv[1]))["version"])
releases = sorted(semantic_version.Version(v) for v in (yaml.safe_load(open(sys.argv[2])) or {}).get("releases") or {})
if not releases:
    print("-", galaxy, galaxy)
else:
    following = releases[-1].next_patch()
    print(releases[-1], max(following, galaxy), galaxy)
PY
)

(cd "$copy" && "$acl" generate >"$scratch/generate.log" 2>&1) || { cat "$scratch/generate.log"; fail "generate failed"; }
if [ "$last" = - ]; then
  fail "changelogs/changelog.yaml holds no release (0.1.0 was released): restore it from git"
elif [ ! -f CHANGELOG.md ]; then
  fail "no CHANGELOG.md: run antsibull-changelog generate and commit it"
elif ! diff -u "$copy/CHANGELOG.md" CHANGELOG.md >"$scratch/changelog.diff" 2>&1; then
  fail "CHANGELOG.md is not what antsibull-changelog generate makes of changelogs/changelog.yaml" \
    "(- generated, + this file; edit changelog.yaml, not CHANGELOG.md, then generate):"
  head -40 "$scratch/changelog.diff"
fi
if [ "$last" != - ] && "$BIN/python" -c 'import sys, semantic_version as s; sys.exit(s.Version(sys.argv[1]) >= s.Version(sys.argv[2]))' \
  "$galaxy" "$last"; then
  fail "galaxy.yml's version $galaxy is older than the last release $last in changelogs/changelog.yaml"
fi

mapfile -t pending < <(find changelogs/fragments -maxdepth 1 -type f \( -name '*.yml' -o -name '*.yaml' \) 2>/dev/null \
  | sed 's#.*/##' | sort)
if [ "${#pending[@]}" -eq 0 ]; then
  echo "changelog: no pending fragments (last release $last)"
else
  # prevent_known_fragments: a fragment named like one already released would be dropped without a word.
  known=$("$BIN/python" -c 'import sys, yaml
for r in (yaml.safe_load(open(sys.argv[1])).get("releases") or {}).values():
    print("\n".join(r.get("fragments") or []))' changelogs/changelog.yaml)
  clash=0
  for f in "${pending[@]}"; do
    if grep -qxF "$f" <<<"$known"; then
      fail "changelogs/fragments/$f: a fragment of that name was released, so a release would drop it: rename it"
      clash=1
    fi
  done
  if [ "$clash" -eq 0 ]; then
    if (cd "$copy" && "$acl" release --version "$trial" >"$scratch/release.log" 2>&1) \
      && grep -qxF "## v${trial//./\\.}" "$copy/CHANGELOG.md"; then
      echo "changelog: ${#pending[@]} pending fragment(s) release cleanly as $trial (last release $last," \
        "galaxy.yml $galaxy; new entries: $(($(grep -c '^\* ' "$copy/CHANGELOG.md") - $(grep -c '^\* ' CHANGELOG.md))))"
      if [ -n "${PREVIEW:-}" ]; then cp "$copy/CHANGELOG.md" "$PREVIEW" && echo "changelog: preview in $PREVIEW"; fi
    else
      fail "the pending fragments do not release as $trial:"
      cat "$scratch/release.log"
    fi
  fi
fi

ms=$((($(date +%s%N) - started) / 1000000))
wall="$((ms / 1000)).$((ms % 1000 / 100)) s"
if [ "$failed" -ne 0 ]; then
  echo "changelog: FAILED ($wall)"
  exit 1
fi
echo "changelog: ok: fragments and changelog.yaml lint, CHANGELOG.md is generate's output (last release $last) ($wall)"
