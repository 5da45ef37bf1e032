#!/usr/bin/env bash
# Builds gb10-sim/vllm-standin:0.32.0 FROM the simulation's Debian base, offline: the pinned wheels of
# requirements.txt are downloaded once on this host into $SIM_BUILD/standin-wheels, the two stand-in wheels are
# written by make_wheel.py, and `docker build --pull=false` installs them with --no-index. Cached by a stamp of
# every source plus the base image ID (label gb10.sim.recipe): unchanged inputs are not rebuilt.
# Then its next release, gb10-sim/vllm-standin:0.32.0-next: the same layers under a new release label, so a new
# image config and a new registry digest (the rolling upgrade to a new image, issue 17), at no cost in pulls.
source "$(dirname "$0")/../lib/common.sh"
require_docker

STANDIN_IMAGE="${SIM_STANDIN_IMAGE:-gb10-sim/vllm-standin:0.32.0}"
NEXT_IMAGE="${SIM_STANDIN_NEXT_IMAGE:-$STANDIN_IMAGE-next}"
HERE="$SIM_ROOT/standin"
REPO_ROOT="$(cd "$SIM_ROOT/.." && pwd)"
CATALOG="$REPO_ROOT/plugins/module_utils/vllm_catalog/vllm-0.32.0.json"
PIP="$REPO_ROOT/.venv/bin/pip"
[ -x "$PIP" ] || PIP="python3 -m pip"

base_id=$(docker image inspect -f '{{.Id}}' "$SIM_BASE_IMAGE" 2>/dev/null) \
  || die "base image $SIM_BASE_IMAGE is missing: run sim/build_images.sh (make sim-images) first"
mapfile -t sources < <(find "$HERE" "$SIM_ROOT/flashinfer_standin" -type f \( -name '*.py' -o -name '*.txt' -o -name '*.sh' -o -name Dockerfile \) \
  -not -path '*/__pycache__/*' | LC_ALL=C sort)
stamp="$(recipe_stamp "${sources[@]}" "$CATALOG")-${base_id#sha256:}"
stamp="${stamp:0:40}"
build_next() {
  # docker build of an unchanged Dockerfile on the same base reuses its cache, so the next image keeps its ID
  # (and its digest) across runs; a rebuilt stand-in gives a new one.
  printf 'FROM %s\nLABEL gb10.sim.release="next"\n' "$STANDIN_IMAGE" \
    | docker build -q --pull=false -t "$NEXT_IMAGE" - >"$SIM_BUILD/standin-next-build.log" 2>&1 \
    || { tail -n 30 "$SIM_BUILD/standin-next-build.log" >&2; die "docker build of $NEXT_IMAGE failed"; }
  say "next release $NEXT_IMAGE (same layers as $STANDIN_IMAGE, its own digest)"
}

if [ "$(image_stamp "$STANDIN_IMAGE")" = "$stamp" ]; then
  say "stand-in image $STANDIN_IMAGE is current"
  build_next
  exit 0
fi

wheels="$SIM_BUILD/standin-wheels"
ctx="$SIM_BUILD/standin-context"
mkdir -p "$wheels"
say "wheelhouse for the stand-in: $wheels (pinned, binary only)"
# --no-deps: requirements.txt pins every distribution, so nothing is resolved and nothing drifts.
$PIP download -q --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.11 \
  -r "$HERE/requirements.txt" -d "$wheels" 2>&1 | grep -v 'is ignored' || true
rm -rf "$ctx"
mkdir -p "$ctx/wheels"
grep -v '^#' "$HERE/requirements.txt" | while read -r pin; do
  [ -n "$pin" ] || continue
  name=${pin%%==*}; version=${pin#*==}
  norm=$(printf '%s' "$name" | tr 'A-Z-' 'a-z_')
  found=$(find "$wheels" -maxdepth 1 -iname "${norm}-${version}-*.whl" | head -n1)
  [ -n "$found" ] || die "wheel for $pin is missing from $wheels (pip download failed?)"
  cp "$found" "$ctx/wheels/"
done
cp "$HERE/requirements.txt" "$ctx/wheels/requirements.txt"
python3 "$HERE/make_wheel.py" "$ctx/wheels" "$CATALOG" >/dev/null
cp "$HERE/Dockerfile" "$ctx/Dockerfile"
say "building $STANDIN_IMAGE from $SIM_BASE_IMAGE"
docker build -q --pull=false --build-arg "BASE=$SIM_BASE_IMAGE" --label "gb10.sim.recipe=$stamp" \
  -t "$STANDIN_IMAGE" "$ctx" >"$SIM_BUILD/standin-build.log" 2>&1 \
  || { tail -n 30 "$SIM_BUILD/standin-build.log" >&2; die "docker build of $STANDIN_IMAGE failed: see $SIM_BUILD/standin-build.log"; }
rm -rf "$ctx"
say "built $STANDIN_IMAGE ($(docker image inspect -f '{{.Size}}' "$STANDIN_IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"
build_next
