#!/usr/bin/env bash
# Build fake DGX OS kernel / NVIDIA packages with equivs into a local flat apt repository.
#
# Two complete sets side by side, so the pins choose: A (kernel 6.17.0-1014 with driver 580.142, the pinned one) and
# C (kernel 6.17.0-1015 with driver 580.150, the driver-change target), each with its kernel, its prebuilt NVIDIA
# modules, its metapackages and its driver. Then kernel B (6.17.0-1018) with its kernel metapackages but no modules
# (the phased-update gap of seed 004: the kernel side of the archive moved, the modules side did not). The driver
# Depends on nvidia-dkms-580-open (<= <upstream>-1) as Ubuntu's does (fixtures/apt_unmet_deps_nvidia-hwe-24.04_
# dgx-spark.txt), so an older dkms satisfies a newer driver unless the set pins it too. gb10-sim-postinst-fails
# is a package whose postinst fails: put in a target set (nvidia_lockstep_extra_packages) it makes the install step
# fail the way a real maintainer script does, with the rest of the transaction unpacked. Names and version shapes are Ubuntu's
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
DRIVER_A=580.142-0ubuntu0.24.04.1
ABI_C=6.17.0-1015
VER_C=6.17.0-1015.15
MOD_VER_C=6.17.0-1015.15+1
DRIVER_C=580.150-0ubuntu0.24.04.1
ABI_B=6.17.0-1018
VER_B=6.17.0-1018.18

for tool in equivs-build dpkg-scanpackages; do
  command -v "$tool" >/dev/null || { echo "build.sh: $tool is missing (apt-get install equivs dpkg-dev)" >&2; exit 1; }
done

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$OUT"
rm -f "$OUT"/*.deb "$OUT"/Packages "$OUT"/Packages.gz

# pkg NAME VERSION DEPENDS [SRC:DEST ...]: one equivs control file, built in its own directory, in the background
# (equivs-build takes seconds per package; the builds are independent). finish waits for them all.
PIDS=()
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
    [ -n "${POSTINST:-}" ] && echo "Postinst: $POSTINST"
    local spec prefix="Files:"
    for spec in "$@"; do
      echo "$prefix ${spec%%:*} ${spec#*:}"
      prefix=""
    done
    echo "Description: gb10.serving simulation stand-in for $name"
    echo " Built by sim/fake_nvidia_packages/build.sh with equivs; carries no kernel and no driver."
  } >"$dir/control"
  (cd "$dir" && equivs-build control >build.log 2>&1 && mv ./*.deb "$OUT/") || { cat "$dir/build.log" >&2; exit 1; } &
  PIDS+=("$!")
}

finish() {
  local pid failed=0
  for pid in "${PIDS[@]}"; do wait "$pid" || failed=1; done
  [ "$failed" -eq 0 ] || { echo "build.sh: a package failed to build (its build.log is above)" >&2; exit 1; }
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

# driver VERSION: the user space, the module's shared files and the dkms package of one driver version.
driver() {
  local version="$1" upstream="${1%%-*}"
  pkg "nvidia-kernel-common-$BRANCH" "$version" ""
  pkg "nvidia-dkms-$BRANCH-$VARIANT" "$version" "nvidia-kernel-common-$BRANCH (>= $upstream)"
  pkg "nvidia-driver-$BRANCH-$VARIANT" "$version" \
    "nvidia-dkms-$BRANCH-$VARIANT (<= $upstream-1), nvidia-kernel-common-$BRANCH (>= $upstream)"
}

# modules ABI VERSION DRIVER: the prebuilt nvidia.ko for one kernel ABI and the modules metapackage at it.
modules() {
  local abi="$1" version="$2" upstream="${3%%-*}" ko
  ko="$(payload "modules-$abi/nvidia.ko" "fake nvidia.ko for $abi-$FLAVOUR")"
  pkg "linux-modules-nvidia-$BRANCH-$VARIANT-$abi-$FLAVOUR" "$version" \
    "linux-modules-$abi-$FLAVOUR, nvidia-kernel-common-$BRANCH (>= $upstream)" \
    "$ko:/lib/modules/$abi-$FLAVOUR/kernel/nvidia-$BRANCH-$VARIANT"
  pkg "linux-modules-nvidia-$BRANCH-$VARIANT-$META" "$version" \
    "linux-modules-nvidia-$BRANCH-$VARIANT-$abi-$FLAVOUR (= $version), nvidia-kernel-common-$BRANCH (>= $upstream)"
}

# Set A and set C: kernel, metapackages, modules and driver.
driver "$DRIVER_A"
kernel_abi "$ABI_A" "$VER_A"
kernel_meta "$ABI_A" "$VER_A"
modules "$ABI_A" "$MOD_VER_A" "$DRIVER_A"
driver "$DRIVER_C"
kernel_abi "$ABI_C" "$VER_C"
kernel_meta "$ABI_C" "$VER_C"
modules "$ABI_C" "$MOD_VER_C" "$DRIVER_C"

# Kernel B with its metapackages, and no modules for it (the gap).
kernel_abi "$ABI_B" "$VER_B"
kernel_meta "$ABI_B" "$VER_B"

# A package whose postinst fails (the failure a test injects between install and hold).
postinst="$(payload postinst-fails "$(printf '#!/bin/sh\necho "gb10-sim-postinst-fails: postinst fails on purpose (a test)" >&2\nexit 1')")"
POSTINST="$postinst" pkg gb10-sim-postinst-fails 1.0 ""

finish
(cd "$OUT" && dpkg-scanpackages --multiversion . /dev/null >Packages 2>/dev/null && gzip -9kf Packages)
echo "build.sh: $(find "$OUT" -name '*.deb' | wc -l) packages in $OUT"
