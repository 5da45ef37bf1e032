#!/usr/bin/env bash
# Build fake DGX OS kernel / NVIDIA packages with equivs into a local flat apt repository.
#
# Two kernel ABIs (A, the pinned one, and B, the newer one), prebuilt NVIDIA modules for A only, the kernel
# metapackages at both A and B, the modules metapackage at A only (the phased-update gap of seed 004: the kernel side
# of the archive moved, the modules side did not), and the driver. Names and version shapes are Ubuntu's
# (linux-meta-nvidia, linux-signed-nvidia-6.17, linux-nvidia-6.17, linux-restricted-modules-nvidia, nvidia-graphics-
# drivers-580); the files are just enough for gb10.serving.lockstep_state: /boot/vmlinuz-<release>,
# /lib/modules/<release>/ and /lib/modules/<release>/kernel/nvidia-580-open/nvidia.ko.
#
# Usage: sim/fake_nvidia_packages/build.sh [OUT_DIR]     (default: sim/build/fake_nvidia_packages/repo)
# Needs: equivs, dpkg-dev (dpkg-scanpackages). Serve OUT_DIR as `deb [trusted=yes] file:OUT_DIR ./`.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HERE/../.." && pwd)"
OUT="$(realpath -m "${1:-$REPO_ROOT/sim/build/fake_nvidia_packages/repo}")"

BRANCH=580
VARIANT=open
FLAVOUR=nvidia
META=nvidia-hwe-24.04
SERIES=6.17
ABI_A=6.17.0-1014
VER_A=6.17.0-1014.14
MOD_VER_A=6.17.0-1014.14+1
ABI_B=6.17.0-1018
VER_B=6.17.0-1018.18
DRIVER_VER=580.142-0ubuntu0.24.04.1

for tool in equivs-build dpkg-scanpackages; do
  command -v "$tool" >/dev/null || { echo "build.sh: $tool is missing (apt-get install equivs dpkg-dev)" >&2; exit 1; }
done

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"
rm -f "$OUT"/*.deb "$OUT"/Packages "$OUT"/Packages.gz

# pkg NAME VERSION DEPENDS [SRC:DEST ...]: one equivs control file, built in its own directory.
pkg() {
  local name="$1" version="$2" depends="$3"
  shift 3
  local dir="$WORK/$name-$version"
  mkdir -p "$dir"
  {
    echo "Section: kernel"
    echo "Priority: optional"
    echo "Standards-Version: 3.9.2"
    echo "Package: $name"
    echo "Version: $version"
    echo "Maintainer: gb10.serving simulation <sim@gb10.invalid>"
    echo "Architecture: all"
    [ -n "$depends" ] && echo "Depends: $depends"
    local spec prefix="Files:"
    for spec in "$@"; do
      echo "$prefix ${spec%%:*} ${spec#*:}"
      prefix=""
    done
    echo "Description: gb10.serving simulation stand-in for $name"
    echo " Built by sim/fake_nvidia_packages/build.sh with equivs; carries no kernel and no driver."
  } >"$dir/control"
  (cd "$dir" && equivs-build control >build.log 2>&1) || { cat "$dir/build.log" >&2; exit 1; }
  mv "$dir"/*.deb "$OUT/"
}

# payload FILE CONTENT: a file under $WORK/payload to ship.
payload() {
  mkdir -p "$(dirname "$WORK/payload/$1")"
  printf '%s\n' "$2" >"$WORK/payload/$1"
  echo "$WORK/payload/$1"
}

kernel_abi() {
  local abi="$1" version="$2" release="$1-$FLAVOUR"
  local vmlinuz modorder
  vmlinuz="$(payload "$release/vmlinuz-$release" "fake kernel image $release")"
  modorder="$(payload "$release/modules.order" "kernel/drivers/gpu/drm/drm.ko")"
  pkg "linux-modules-$release" "$version" "" "$modorder:/lib/modules/$release"
  pkg "linux-image-$release" "$version" "linux-modules-$release" "$vmlinuz:/boot"
  pkg "linux-$FLAVOUR-$SERIES-headers-$abi" "$version" ""
  pkg "linux-headers-$release" "$version" "linux-$FLAVOUR-$SERIES-headers-$abi"
}

kernel_meta() {
  local abi="$1" version="$2" release="$1-$FLAVOUR"
  pkg "linux-image-$META" "$version" "linux-image-$release"
  pkg "linux-headers-$META" "$version" "linux-headers-$release"
  pkg "linux-$META" "$version" "linux-image-$META (= $version), linux-headers-$META (= $version)"
}

# Driver (user space and the module's shared files).
pkg "nvidia-kernel-common-$BRANCH" "$DRIVER_VER" ""
pkg "nvidia-driver-$BRANCH-$VARIANT" "$DRIVER_VER" "nvidia-kernel-common-$BRANCH (>= ${DRIVER_VER%%-*})"

# Kernel A and B, with their metapackages.
kernel_abi "$ABI_A" "$VER_A"
kernel_meta "$ABI_A" "$VER_A"
kernel_abi "$ABI_B" "$VER_B"
kernel_meta "$ABI_B" "$VER_B"

# Prebuilt modules for A only, and the modules metapackage at A only.
ko="$(payload "modules-$ABI_A/nvidia.ko" "fake nvidia.ko for $ABI_A-$FLAVOUR")"
pkg "linux-modules-nvidia-$BRANCH-$VARIANT-$ABI_A-$FLAVOUR" "$MOD_VER_A" \
  "linux-modules-$ABI_A-$FLAVOUR, nvidia-kernel-common-$BRANCH (>= ${DRIVER_VER%%-*})" \
  "$ko:/lib/modules/$ABI_A-$FLAVOUR/kernel/nvidia-$BRANCH-$VARIANT"
pkg "linux-modules-nvidia-$BRANCH-$VARIANT-$META" "$MOD_VER_A" \
  "linux-modules-nvidia-$BRANCH-$VARIANT-$ABI_A-$FLAVOUR (= $MOD_VER_A), nvidia-kernel-common-$BRANCH (>= ${DRIVER_VER%%-*})"

(cd "$OUT" && dpkg-scanpackages --multiversion . /dev/null >Packages 2>/dev/null && gzip -9kf Packages)
echo "build.sh: $(find "$OUT" -name '*.deb' | wc -l) packages in $OUT"
