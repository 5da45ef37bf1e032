#!/usr/bin/env bash
# Builds, cached by recipe, the two images the simulation needs without any registry:
#   gb10-sim-debian:bookworm  Debian minbase by debootstrap (or a pulled debian:bookworm where a registry answers)
#   gb10-sim-node:latest      that + systemd as PID 1, python3 and its own Docker engine (a simulated GB10 node)
source "$(dirname "$0")/lib/common.sh"
require_docker
mkdir -p "$SIM_BUILD"

BASE_INCLUDE="systemd,systemd-sysv,dbus,python3,python3-apt,sudo,procps,iproute2,ca-certificates"
base_stamp=$(printf '%s %s' "$BASE_INCLUDE" "$SIM_MIRROR" | sha256sum | cut -c1-16)
node_stamp=$(recipe_stamp "$0" "$SIM_ROOT/node/packages.txt" "$SIM_ROOT/node/daemon.json" "$SIM_ROOT/node/registry.yml" \
  "$SIM_ROOT/fake_nvidia_packages/build.sh")-$base_stamp

# A rootfs folder that may still hold the mounts of a chroot_run killed midway: unmount them before anything
# removes it, and never cross into a mount while removing (a bind of the host's /dev under it would empty /dev).
clear_rootfs() {
  local root=$1 mnt
  while read -r mnt; do umount -l "$mnt" 2>/dev/null || true; done \
    < <(awk -v r="$root/" 'index($2, r) == 1 {print $2}' /proc/self/mounts | sort -r)
  rm -rf --one-file-system "$root"
}

chroot_run() {
  local root=$1 rc=0; shift
  mount -t proc proc "$root/proc"; mount --rbind /dev "$root/dev"; mount -t sysfs sys "$root/sys"
  # The host's resolver for apt inside the chroot: a rootfs taken back out of the cached base image (docker export)
  # has an empty resolv.conf, as Docker mounts its own at run time (seen: every fetch "Temporary failure resolving").
  rm -f "$root/etc/resolv.conf"; cp -L /etc/resolv.conf "$root/etc/resolv.conf"
  # Unmounted whatever the command does: under set -e a failing command would skip a RETURN trap and leave the
  # host's /dev bound under the rootfs (the next build's rm -rf then deleted the host's device nodes).
  chroot "$root" "$@" || rc=$?
  umount -R "$root/dev" "$root/proc" "$root/sys" 2>/dev/null || umount -lR "$root/dev" "$root/proc" "$root/sys" || true
  : > "$root/etc/resolv.conf"
  return "$rc"
}

import_rootfs() {  # import_rootfs ROOTFS IMAGE STAMP
  local root=$1 image=$2 stamp=$3
  tar -C "$root" --exclude='./var/cache/apt/archives/*.deb' -c . \
    | docker import -c 'ENV container=docker' -c 'CMD ["/lib/systemd/systemd"]' - "$image-imported" >/dev/null
  # docker import cannot set STOPSIGNAL or labels: one tiny build on top of the import does.
  printf 'FROM %s\nSTOPSIGNAL SIGRTMIN+3\nLABEL gb10.sim.recipe="%s"\n' "$image-imported" "$stamp" \
    | docker build -q --pull=false -t "$image" - >/dev/null 2>"$SIM_BUILD/build.log" \
    || die "docker build of $image failed: see $SIM_BUILD/build.log"
  docker rmi "$image-imported" >/dev/null
}

build_base() {
  if [ "$(image_stamp "$SIM_BASE_IMAGE")" = "$base_stamp" ]; then
    say "base image $SIM_BASE_IMAGE is current"; return
  fi
  local root="$SIM_BUILD/rootfs-base"
  if timeout 20 docker pull -q debian:bookworm >/dev/null 2>&1; then
    say "a registry answered: using debian:bookworm as the base"
    local cid; cid=$(docker create debian:bookworm)
    clear_rootfs "$root"; mkdir -p "$root"; docker export "$cid" | tar -C "$root" -x; docker rm "$cid" >/dev/null
    chroot_run "$root" sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      $(echo "$BASE_INCLUDE" | tr , ' ') >/dev/null"
  else
    command -v debootstrap >/dev/null || die "debootstrap is missing and no registry answers: apt-get install debootstrap"
    say "no registry: debootstrap bookworm from $SIM_MIRROR (30-60 s)"
    clear_rootfs "$root"
    debootstrap --variant=minbase --include="$BASE_INCLUDE" bookworm "$root" "$SIM_MIRROR" >"$SIM_BUILD/debootstrap.log" 2>&1 \
      || die "debootstrap failed, see $SIM_BUILD/debootstrap.log"
  fi
  : > "$root/etc/machine-id"
  import_rootfs "$root" "$SIM_BASE_IMAGE" "$base_stamp"
  say "built $SIM_BASE_IMAGE"
}

build_node() {
  if [ "$(image_stamp "$SIM_NODE_IMAGE")" = "$node_stamp" ]; then
    say "node image $SIM_NODE_IMAGE is current"; return
  fi
  local base_root="$SIM_BUILD/rootfs-base" root="$SIM_BUILD/rootfs-node"
  if [ ! -d "$base_root/etc" ]; then
    # A fresh checkout with a cached base image: take the rootfs back out of it instead of debootstrapping.
    local cid; cid=$(docker create "$SIM_BASE_IMAGE" /bin/true)
    clear_rootfs "$base_root"; mkdir -p "$base_root"; docker export "$cid" | tar -C "$base_root" -x; docker rm "$cid" >/dev/null
    rm -f "$base_root/.dockerenv"
  fi
  clear_rootfs "$root"; cp -a "$base_root" "$root"
  printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"; chmod +x "$root/usr/sbin/policy-rc.d"
  say "installing the node's own Docker engine into the node rootfs"
  chroot_run "$root" sh -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    $(tr '\n' ' ' < "$SIM_ROOT/node/packages.txt") >/dev/null && apt-get clean"
  rm -f "$root/usr/sbin/policy-rc.d"
  install -D -m 0644 "$SIM_ROOT/node/daemon.json" "$root/etc/docker/daemon.json"
  install -D -m 0644 "$SIM_ROOT/node/registry.yml" "$root/etc/docker/registry/config.yml"
  # DGX OS ships its NVIDIA archive configured: the node carries the fake kernel/driver packages as a local repository.
  "$SIM_ROOT/fake_nvidia_packages/build.sh" "$root/srv/gb10-fake-nvidia-repo" >"$SIM_BUILD/fake_nvidia_packages.log" 2>&1 \
    || die "building the fake NVIDIA packages failed, see $SIM_BUILD/fake_nvidia_packages.log"
  echo "deb [trusted=yes] file:/srv/gb10-fake-nvidia-repo ./" > "$root/etc/apt/sources.list.d/gb10-fake-nvidia.list"
  chroot_run "$root" apt-get update -qq
  # The registry runs as its own container from this image; nodes never start it.
  rm -f "$root/etc/systemd/system/multi-user.target.wants/docker-registry.service"
  : > "$root/etc/machine-id"
  import_rootfs "$root" "$SIM_NODE_IMAGE" "$node_stamp"
  say "built $SIM_NODE_IMAGE"
}

build_base
build_node
