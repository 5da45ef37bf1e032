#!/usr/bin/env bash
# Starts the simulation's model hub: a container on the simulation network at $SIM_SUBNET_BASE.6, alias `hub`,
# serving sim/model's generated repository on port 8080 (HF_ENDPOINT=http://hub:8080). Removed by sim/down.sh.
# SIM_HUB_TOKEN_FILE=<file>: the hub then requires that bearer token on every API and file request.
source "$(dirname "$0")/../lib/common.sh"
require_docker
name="$SIM_PREFIX-hub"
token_args=()
if [ -n "${SIM_HUB_TOKEN_FILE:-}" ]; then
  token_args=(-v "$(realpath "$SIM_HUB_TOKEN_FILE"):/run/hub-token:ro")
fi
if [ "$(docker inspect -f '{{.State.Running}}' "$name" 2>/dev/null || echo absent)" != true ]; then
  docker rm -f "$name" >/dev/null 2>&1 || true
  docker run -d --name "$name" --label "$SIM_LABEL" --hostname hub --network "$SIM_NETWORK" \
    --ip "$SIM_SUBNET_BASE.6" --network-alias hub -v "$SIM_ROOT:/opt/sim:ro" "${token_args[@]}" \
    --entrypoint /usr/bin/python3 "$SIM_BASE_IMAGE" /opt/sim/hub/hub.py --port 8080 \
    ${SIM_HUB_TOKEN_FILE:+--token-file /run/hub-token} >/dev/null
fi
for _ in $(seq 1 60); do
  if docker logs "$name" 2>&1 | grep -q '^hub serving'; then
    say "hub up at $SIM_SUBNET_BASE.6:8080 (alias hub): $(docker logs "$name" 2>&1 | grep '^hub serving')"
    exit 0
  fi
  sleep 1
done
docker logs "$name" >&2 || true
die "the hub did not start within 60 s (logs above)"
