#!/usr/bin/env bash
# How to reach what `make sim` left running.
source "$(dirname "$0")/lib/common.sh"
cat <<MSG

The simulation is running ($SIM_NODES nodes on $SIM_NETWORK $SIM_SUBNET, registry at $SIM_REGISTRY_IP:5000):
$(for i in $(seq 1 "$SIM_NODES"); do printf '  %-8s %-11s docker exec -it %s-%s bash\n' "$(node_name "$i")" "$(node_ip "$i")" "$SIM_PREFIX" "$(node_name "$i")"; done)
  a node's own engine:  docker exec $SIM_PREFIX-spark-1 docker ps
  earlyoom's own log:   docker exec $SIM_PREFIX-spark-1 journalctl -u earlyoom --no-pager
  converge again:       make sim-converge      (a second run reports changed=0)
  remove it all:        make sim-down
MSG
