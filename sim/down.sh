#!/usr/bin/env bash
# Removes everything the simulation made: containers, network and volumes. Images stay cached;
# SIM_PURGE_IMAGES=1 removes them too.
source "$(dirname "$0")/lib/common.sh"
require_docker
mapfile -t containers < <(docker ps -aq --filter "label=$SIM_LABEL")
[ "${#containers[@]}" -eq 0 ] || docker rm -f -v "${containers[@]}" >/dev/null
mapfile -t volumes < <(docker volume ls -q --filter "name=^$SIM_PREFIX-")
[ "${#volumes[@]}" -eq 0 ] || docker volume rm "${volumes[@]}" >/dev/null
docker network rm "$SIM_NETWORK" >/dev/null 2>&1 || true
if [ "${SIM_PURGE_IMAGES:-0}" = 1 ]; then
  docker image rm "$SIM_NODE_IMAGE" "$SIM_BASE_IMAGE" >/dev/null 2>&1 || true
fi
say "removed ${#containers[@]} containers, ${#volumes[@]} volumes and the network $SIM_NETWORK"
