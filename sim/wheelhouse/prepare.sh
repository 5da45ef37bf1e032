#!/usr/bin/env bash
# Prepares the local wheelhouse the serving image's ray layer installs from when a site is air-gapped
# (pip install --no-index --find-links): real `ray[default]` and every dependency, as binary wheels for the
# Python and CPU of the image that will run them, plus the simulation's pin-mover wheel (see README.md).
# Downloaded once: a second run with the same Ray version and platform moves nothing.
#   sim/wheelhouse/prepare.sh [IMAGE]      IMAGE: where to read the Python version and CPU from
#                                           (default: the vLLM stand-in, else the Debian or node image of the sim)
# Env: SIM_RAY_VERSION (default 2.60.0), SIM_WHEELHOUSE (default sim/build/wheelhouse), PIP (default .venv/bin/pip)
source "$(dirname "$0")/../lib/common.sh"
RAY_VERSION="${SIM_RAY_VERSION:-2.60.0}"
WHEELHOUSE="${SIM_WHEELHOUSE:-$SIM_BUILD/wheelhouse}"
PIP="${PIP:-$SIM_ROOT/../.venv/bin/pip}"

image="${1:-}"
if [ -z "$image" ]; then
  image=gb10-sim-debian:bookworm
  for candidate in gb10-sim-debian:bookworm "$SIM_NODE_IMAGE" gb10-sim/vllm-standin:0.32.0; do
    docker image inspect "$candidate" >/dev/null 2>&1 && image=$candidate
  done
fi
require_docker
# The image's own interpreter says which wheels it can install (cp311 + manylinux glibc + CPU).
read -r pyver machine glibc < <(docker run --rm --network none --entrypoint python3 "$image" -c \
  'import platform,sys; print("%d.%d" % sys.version_info[:2], platform.machine(), platform.libc_ver()[1])') \
  || die "cannot run python3 in $image to read its platform"
abi="cp${pyver/./}"
stamp="ray[default]==$RAY_VERSION $abi $machine glibc$glibc"
if [ -f "$WHEELHOUSE/.stamp" ] && [ "$(cat "$WHEELHOUSE/.stamp")" = "$stamp" ]; then
  say "wheelhouse $WHEELHOUSE is current ($stamp, $(find "$WHEELHOUSE" -name '*.whl' | wc -l) wheels)"
  exit 0
fi
# manylinux tags this glibc accepts: manylinux2014 (2.17) up to the image's own glibc.
platforms=(--platform "manylinux2014_$machine")
for minor in $(seq 17 "${glibc#2.}"); do platforms+=(--platform "manylinux_2_${minor}_$machine"); done
mkdir -p "$WHEELHOUSE"
rm -f "$WHEELHOUSE/.stamp"
say "downloading ray[default]==$RAY_VERSION for $abi $machine (glibc $glibc) into $WHEELHOUSE"
PIP_CONSTRAINT='' "$PIP" download --quiet --disable-pip-version-check --only-binary=:all: \
  --python-version "$pyver" --implementation cp --abi "$abi" "${platforms[@]}" \
  --dest "$WHEELHOUSE" "ray[default]==$RAY_VERSION" 2>&1 | { grep -v "is ignored: it is neither" || true; }
"$SIM_ROOT/../.venv/bin/python" "$(dirname "$0")/fake_wheel.py" "$WHEELHOUSE" flashinfer-python 0.6.17 \
  "flashinfer/__init__.py=__version__ = \"0.6.17\""
echo "$stamp" >"$WHEELHOUSE/.stamp"
say "wheelhouse ready: $(find "$WHEELHOUSE" -name '*.whl' | wc -l) wheels, $(du -sh "$WHEELHOUSE" | cut -f1)"
