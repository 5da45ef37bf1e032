#!/usr/bin/env bash
# What `make sim` and `make test` need on this host outside .venv (make host; .ci/run):
#   docker and dockerd (docker.io), debootstrap, equivs-build (equivs), dpkg-scanpackages (dpkg-dev): the images;
#   ninja (ninja-build) and gcc: the FlashInfer stand-in's unit tests compile real units; g++: the toolchain-gap tests
#   link a C++ unit with FlashInfer's link driver (c++); make;
#   haproxy: the proxy role's unit tests run Debian's HAProxy 2.6 on its rendered configuration;
#   promtool (Debian's prometheus, no recommends, its server disabled): the monitoring role's unit tests check
#   its rendered configuration and rules with promtool 2.42 and run its recording rules' promtool unit test;
#   openssl: sim/tls.py makes the simulation's CA and the proxy's certificate, the proxy role's TLS checks read PEMs;
#   the shellcheck package: ansible-test sanity's shellcheck test (scripts/sanity.sh refuses to let it be skipped);
#   and a Docker engine that answers `docker info` (started with systemctl, else dockerd in the background).
# As root on Debian or Ubuntu what is missing is installed (apt-get update runs only then); elsewhere (not root, or
# no apt-get) it stops at once, naming what is missing and the line that installs it. All present: no apt, no network.
#   scripts/host_setup.sh        the packages above and the engine
#   scripts/host_setup.sh venv   only python3.X-venv, where $PYTHON (default python3) lacks ensurepip (the venv rule)
# Env: GB10_DOCKERD_LOG (default /tmp/gb10-dockerd.log): dockerd's log where this script starts it.
set -euo pipefail
DOCKERD_LOG="${GB10_DOCKERD_LOG:-/tmp/gb10-dockerd.log}"
# debootstrap and dockerd live in sbin, which a user's PATH may lack.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

say() { printf '[host] %s\n' "$*"; }
die() { printf '[host] ERROR: %s\n' "$*" >&2; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }
engine_answers() { docker info >/dev/null 2>&1; }

debian_like() {
  local id="" id_like=""
  # shellcheck disable=SC1091
  [ -r /etc/os-release ] && { id=$(. /etc/os-release && echo "${ID:-}"); id_like=$(. /etc/os-release && echo "${ID_LIKE:-}"); }
  case " $id $id_like " in *" debian "* | *" ubuntu "*) have apt-get ;; *) return 1 ;; esac
}

# apt_install WHAT PACKAGE...: apt-get as root on Debian/Ubuntu, else stop naming WHAT and the exact install line.
apt_install() {
  local what=$1
  shift
  [ "$#" -gt 0 ] || return 0
  if [ "$(id -u)" = 0 ] && debian_like; then
    say "installing $*"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
    return
  fi
  local line="apt-get update && apt-get install -y $*"
  [ "$(id -u)" = 0 ] || line="sudo apt-get update && sudo apt-get install -y $*"
  if debian_like; then
    die "missing: $what. Install, then re-run:
    $line"
  fi
  die "missing: $what; this is not Debian or Ubuntu (or it has no apt-get): install them with this system's
    package manager (on Debian or Ubuntu: $line)"
}

venv_package() {
  local python="${PYTHON:-python3}" version
  have "$python" || die "$python not found: install Python 3.11, 3.12 or 3.13, or pick one with PYTHON=python3.12"
  "$python" -c 'import ensurepip' 2>/dev/null && return 0
  version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  # Only a distribution's own Python gets its venv module from a package; any other was built without ensurepip.
  case "$(readlink -f "$(command -v "$python")")" in
    /usr/bin/*) apt_install "ensurepip for $python (python$version-venv)" "python$version-venv" ;;
    *) die "$(command -v "$python") (Python $version) has no ensurepip, so it cannot make a venv: rebuild it with
    ensurepip, or pick another Python with PYTHON=python3.12" ;;
  esac
  "$python" -c 'import ensurepip' 2>/dev/null || die "$python still lacks ensurepip after installing python$version-venv"
}

packages() {
  local missing=() what=() pair
  add() { [[ " ${missing[*]} " == *" $2 "* ]] || missing+=("$2"); what+=("$1 ($2)"); }
  for pair in docker:docker.io debootstrap:debootstrap equivs-build:equivs dpkg-scanpackages:dpkg-dev \
    ninja:ninja-build gcc:gcc c++:g++ make:make shellcheck:shellcheck haproxy:haproxy \
    openssl:openssl; do
    have "${pair%%:*}" || add "${pair%%:*}" "${pair#*:}"
  done
  # An engine that already answers (another host's, a rootless one) needs no dockerd here.
  have dockerd || engine_answers || add dockerd docker.io
  [ "${#missing[@]}" -eq 0 ] && return 0
  local named
  named=$(printf '%s, ' "${what[@]}")
  apt_install "${named%, }" "${missing[@]}"
  for pair in "${what[@]}"; do
    have "${pair%% *}" || die "${pair%% *} is still missing after installing ${missing[*]}"
  done
}

# promtool ships only in Debian's prometheus package, whose install starts a Prometheus where systemd runs: installed
# without recommends (no exporters), and that server stopped and disabled again (the tests need promtool alone).
promtool_package() {
  have promtool && return 0
  apt_install "promtool (prometheus)" --no-install-recommends prometheus
  if have systemctl && [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus.service >/dev/null 2>&1 || true
  fi
  have promtool || die "promtool is still missing after installing prometheus"
}

engine() {
  engine_answers && return 0
  if [ "$(id -u)" != 0 ]; then
    if [[ "$(docker info 2>&1 || true)" == *"permission denied"* ]]; then
      die "the Docker engine refuses $(id -un) (permission denied on its socket): join its group, log in again, re-run:
    sudo usermod -aG docker $(id -un)"
    fi
    die "no Docker engine answers (docker info failed): start it, then re-run:
    sudo systemctl start docker      (without systemd: sudo sh -c 'nohup dockerd >$DOCKERD_LOG 2>&1 &')"
  fi
  say "no Docker engine answers: starting one"
  local pid=""
  if have systemctl && systemctl start docker 2>/dev/null; then :; else
    nohup dockerd >"$DOCKERD_LOG" 2>&1 &
    pid=$!
  fi
  for _ in $(seq 1 60); do
    engine_answers && { say "Docker engine up${pid:+ (dockerd pid $pid, log $DOCKERD_LOG)}"; return 0; }
    if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
      tail -n 5 "$DOCKERD_LOG" >&2 || true
      die "dockerd exited before its engine answered: see $DOCKERD_LOG"
    fi
    sleep 1
  done
  if [ -n "$pid" ]; then die "dockerd did not answer within 60 s: see $DOCKERD_LOG"; fi
  die "systemctl start docker returned but no engine answered within 60 s: see journalctl -u docker"
}

case "${1:-all}" in
  venv) venv_package ;;
  all) packages; promtool_package; engine ;;
  *) die "usage: $0 [venv]" ;;
esac
