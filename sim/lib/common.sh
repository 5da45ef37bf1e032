# Shared settings and checks for the simulation scripts (sourced, not run).
# shellcheck shell=bash
# shellcheck disable=SC2034  # settings for the scripts that source this file, unused here
set -euo pipefail
SIM_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SIM_BUILD="${SIM_BUILD:-$SIM_ROOT/build}"
SIM_PREFIX="${SIM_PREFIX:-gb10-sim}"
# A prefix's own network unless told otherwise: with the old fixed default, sim/down.sh of another prefix removed
# the network of `make sim` (gb10-sim) too, and two prefixes shared one.
SIM_NETWORK="${SIM_NETWORK:-$SIM_PREFIX}"
# The first three octets of the simulation's /24 (node i is <base>.(10+i), the registry <base>.5, the hub <base>.6).
SIM_SUBNET_BASE="${SIM_SUBNET_BASE:-10.77.0}"
[[ "$SIM_SUBNET_BASE" =~ ^(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])(\.(25[0-5]|2[0-4][0-9]|1?[0-9]?[0-9])){2}$ ]] || {
  printf '[sim] ERROR: SIM_SUBNET_BASE=%s is not three octets of an IPv4 /24 (e.g. 10.77.0, not 10.77.0.0)\n' \
    "$SIM_SUBNET_BASE" >&2
  exit 1
}
SIM_SUBNET="$SIM_SUBNET_BASE.0/24"
SIM_NODES="${SIM_NODES:-2}"
# CPU weight of the simulation's containers (docker --cpu-shares; empty: Docker's default, 1024). make test starts
# the checks beside its longest part with 256, so their nodes yield the cores to it (scripts/stages.sh).
SIM_CPU_SHARES="${SIM_CPU_SHARES:-}"
SIM_BASE_IMAGE="${SIM_BASE_IMAGE:-gb10-sim-debian:bookworm}"
SIM_NODE_IMAGE="${SIM_NODE_IMAGE:-gb10-sim-node:latest}"
SIM_REGISTRY_IP="$SIM_SUBNET_BASE.5"
# The host's own address on the simulation's network (the bridge), where the tests and tools of the host come from:
# inventories/sim opens the fence (roles/fabric_firewall) to it. The first address of the network's --ip-range, which
# is where Docker puts the gateway unless told otherwise; up.sh says so explicitly.
SIM_GATEWAY_IP="$SIM_SUBNET_BASE.128"
# The simulation's CA (ca.pem) and, per subnet, the proxy's certificate and key (<base>/proxy.pem): sim/tls.py makes
# them, inventories/sim reads them from GB10_SIM_TLS_DIR (the Makefile, molecule and the served-site suite export it).
SIM_TLS_DIR="${GB10_SIM_TLS_DIR:-$SIM_BUILD/tls}"
SIM_LABEL="gb10.sim=$SIM_PREFIX"
# The Debian mirror this machine already uses (a user's laptop may set its own).
SIM_MIRROR="${SIM_MIRROR:-$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)}"
SIM_MIRROR="${SIM_MIRROR:-http://deb.debian.org/debian}"

say() { printf '[sim] %s\n' "$*"; }
die() { printf '[sim] ERROR: %s\n' "$*" >&2; exit 1; }

node_ip() { printf '%s.%d' "$SIM_SUBNET_BASE" "$((10 + $1))"; }
node_name() { printf 'spark-%d' "$1"; }

require_docker() {
  command -v docker >/dev/null 2>&1 \
    || die "no docker client on PATH: install Docker (Debian: apt-get install docker.io) and start it, then re-run."
  docker info >/dev/null 2>&1 \
    || die "no Docker engine answers (docker info failed): start it (systemctl start docker, or dockerd &) and re-run."
}

# A content stamp of the files an image is built from, so an unchanged recipe is not rebuilt.
recipe_stamp() { cat "$@" | sha256sum | cut -c1-16; }

image_stamp() { docker image inspect -f '{{ index .Config.Labels "gb10.sim.recipe" }}' "$1" 2>/dev/null || true; }
