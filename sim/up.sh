#!/usr/bin/env bash
# Starts the simulation: one network with fixed addresses (the "fabric"), the local registry, and
# SIM_NODES simulated GB10 nodes, each with systemd as PID 1, its own inner Docker engine and its own disk.
# Unprivileged: privileged containers are refused on these machines (see ../shared/SIM-RECIPE.md).
source "$(dirname "$0")/lib/common.sh"
require_docker

# The proxy speaks TLS (inventories/sim/group_vars/all/tls.yml): the simulation's CA and this subnet's certificate,
# naming the floating address and every node's, made on the controller with openssl; kept while valid.
command -v openssl >/dev/null 2>&1 || die "openssl is missing on this machine: apt-get install openssl"
python3 "$SIM_ROOT/tls.py" --dir "$SIM_TLS_DIR" --subnet-base "$SIM_SUBNET_BASE" --nodes "$SIM_NODES" \
  || die "the simulation's TLS material could not be made in $SIM_TLS_DIR (sim/tls.py, above)"

if ! docker network inspect "$SIM_NETWORK" >/dev/null 2>&1; then
  # Fixed addresses (registry .5, hub .6, floating proxy address .10, nodes .11 up) live in the lower half; Docker
  # hands out addresses of its own only from the upper half, so it never gives the floating address to a container.
  docker network create --label "$SIM_LABEL" --subnet "$SIM_SUBNET" --ip-range "$SIM_SUBNET_BASE.128/25" \
    --gateway "$SIM_GATEWAY_IP" "$SIM_NETWORK" >/dev/null
  say "network $SIM_NETWORK $SIM_SUBNET"
fi

case "$SIM_CPU_SHARES" in
  '') cpu=() ;;
  *[!0-9]*) die "SIM_CPU_SHARES is '$SIM_CPU_SHARES': give a whole number of CPU shares (Docker's default is 1024)" ;;
  *) cpu=(--cpu-shares "$SIM_CPU_SHARES") ;;
esac

cgroupns=()
[ "$(docker info -f '{{.CgroupVersion}}')" = "2" ] && cgroupns=(--cgroupns host)

ensure_running() {  # ensure_running NAME docker-run-args...
  local name=$1; shift
  case "$(docker inspect -f '{{.State.Running}}' "$name" 2>/dev/null || echo absent)" in
    true) return 0 ;;
    false) docker start "$name" >/dev/null ;;
    *) docker run -d --name "$name" --label "$SIM_LABEL" "${cpu[@]}" "$@" >/dev/null ;;
  esac
}

ensure_running "$SIM_PREFIX-registry" --hostname registry --network "$SIM_NETWORK" --ip "$SIM_REGISTRY_IP" \
  --network-alias registry -v "$SIM_PREFIX-registry:/var/lib/docker-registry" \
  --entrypoint /usr/bin/docker-registry "$SIM_NODE_IMAGE" serve /etc/docker/registry/config.yml

for i in $(seq 1 "$SIM_NODES"); do
  node=$(node_name "$i")
  ensure_running "$SIM_PREFIX-$node" --hostname "$node" --network "$SIM_NETWORK" --ip "$(node_ip "$i")" \
    --network-alias "$node" \
    --cap-add ALL --cap-drop SYS_RESOURCE --security-opt seccomp=unconfined \
    --device-cgroup-rule 'a *:* rwm' "${cgroupns[@]}" \
    --tmpfs /run --tmpfs /run/lock --tmpfs /tmp \
    -v /sys/fs/cgroup:/sys/fs/cgroup:rw \
    -v "$SIM_PREFIX-$node-docker:/var/lib/docker" \
    -v "$SIM_PREFIX-$node-data:/var/lib/gb10" \
    --stop-signal SIGRTMIN+3 --stop-timeout 30 "$SIM_NODE_IMAGE"
done

# A node is up when systemd is running and its own engine answers.
for i in $(seq 1 "$SIM_NODES"); do
  node=$(node_name "$i")
  state=none
  for _ in $(seq 1 90); do
    state=$(docker exec "$SIM_PREFIX-$node" systemctl is-system-running 2>/dev/null || true)
    if [ "$state" = running ] && docker exec "$SIM_PREFIX-$node" docker info >/dev/null 2>&1; then
      break
    fi
    sleep 1
  done
  if [ "$state" != running ]; then
    docker exec "$SIM_PREFIX-$node" systemctl --failed --no-pager || true
    die "node $node did not reach systemd 'running' (state: ${state:-none}): this engine cannot run the systemd node recipe"
  fi
  say "node $node up at $(node_ip "$i") (systemd running, inner engine answers)"
done
