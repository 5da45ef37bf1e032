#!/usr/bin/env bash
# Ansible Galaxy is unreachable here: take the collections requirements.yml names out of the
# pinned `ansible` wheel from PyPI into ./collections, and link this checkout in as gb10.serving.
set -euo pipefail
cd "$(dirname "$0")/.."
ANSIBLE_WHEEL_VERSION="${ANSIBLE_WHEEL_VERSION:-12.3.0}"
dest=collections/ansible_collections
stamp="collections/.from-ansible-${ANSIBLE_WHEEL_VERSION}"
if [ ! -f "$stamp" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  .venv/bin/pip download -q --no-deps -d "$tmp" "ansible==${ANSIBLE_WHEEL_VERSION}"
  rm -rf "$dest/community" "$dest/ansible"
  mkdir -p "$dest"
  .venv/bin/python - "$tmp"/ansible-*.whl "$dest" <<'PY'
import sys
import zipfile

wheel, dest = sys.argv[1], sys.argv[2]
wanted = ("community/docker/", "community/general/", "ansible/posix/", "community/library_inventory_filtering_v1/")
prefix = "ansible_collections/"
with zipfile.ZipFile(wheel) as zf:
    members = [m for m in zf.namelist() if m.startswith(prefix) and m[len(prefix):].startswith(wanted)]
    for member in members:
        zf.extract(member, dest + "/..")
print(f"collections: {len(members)} files from {wheel.rsplit('/', 1)[-1]}")
PY
  touch "$stamp"
fi
mkdir -p "$dest/gb10"
ln -sfn ../../.. "$dest/gb10/serving"
