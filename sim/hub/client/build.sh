#!/usr/bin/env bash
# Builds gb10-sim/hf-client:<version>: the simulation's Debian image plus the real huggingface_hub of the project's
# .venv (requirements.txt pins 2.4.0), nothing else. The model_weights scenario runs its throwaway containers from it
# when the vLLM stand-in image (sim/build/images.yml) is not built; both carry the same huggingface_hub.
# Prints the image reference. Cached by a stamp of the packages copied in.
source "$(dirname "$0")/../../lib/common.sh"
require_docker
# The venv may be Python 3.11 to 3.13 and the image runs Debian's 3.11: every package below is pure Python (PyYAML's
# optional C extension, built for the venv's Python, is simply not loaded there).
sites=("$(cd "$SIM_ROOT/.." && pwd)"/.venv/lib/python3.*/site-packages)
site=${sites[0]}
[ -d "$site/huggingface_hub" ] || die "no huggingface_hub in $site: run make venv first"
version=$(sed -n 's/^Version: //p' "$site"/huggingface_hub-*.dist-info/METADATA)
image="gb10-sim/hf-client:$version"
packages=(anyio click filelock fsspec h11 httpcore2 httpx2 huggingface_hub idna packaging tqdm truststore
  typing_extensions yaml)
stamp=$(cd "$site" && printf '%s\n' ./*.dist-info | sha256sum | cut -c1-16)
if [ "$(image_stamp "$image")" != "$stamp" ]; then
  ctx=$(mktemp -d)
  trap 'rm -rf "$ctx"' EXIT
  mkdir "$ctx/site"
  for p in "${packages[@]}"; do
    cp -r "$site/$p" "$ctx/site/" 2>/dev/null || cp "$site/$p.py" "$ctx/site/"
    dist=${p/#yaml/pyyaml}
    find "$site" -maxdepth 1 -iname "$dist-*.dist-info" -exec cp -r {} "$ctx/site/" \;
  done
  printf 'FROM %s\nCOPY site /opt/venv/site\nENV PYTHONPATH=/opt/venv/site HF_HUB_DISABLE_TELEMETRY=1\n' \
    "$SIM_BASE_IMAGE" >"$ctx/Dockerfile"
  docker build -q --pull=false --label "gb10.sim.recipe=$stamp" -t "$image" "$ctx" >/dev/null
fi
echo "$image"
