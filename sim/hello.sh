#!/usr/bin/env bash
# How to reach what `make sim` left running, after proving it serves: a few requests through the proxy, then
# each replica's own /metrics read directly and summed (never through the proxy: seed 002's jumping counters).
source "$(dirname "$0")/lib/common.sh"
# Clients use the floating proxy address where the site has one (roles/proxy_vip), else the first node's proxy.
vip=$(docker exec "$SIM_PREFIX-$(node_name 1)" sed -n 's#^ *\([0-9.]*\)/[0-9]* dev .*#\1#p' \
  /etc/keepalived/keepalived.conf 2>/dev/null | head -n1 || true)
PROXY="${vip:-$(node_ip 1)}:8080"
# The simulation's API key (not a secret: inventories/sim/group_vars/all/security.yml); the proxy wants it on /v1.
key=$(sed -n 's/^gb10_api_key: *//p' "$(dirname "$0")/../inventories/sim/group_vars/all/security.yml")
# The proxy speaks TLS only, with a certificate of the simulation's CA (sim/tls.py): curl verifies it against that CA,
# given on stdin, as every client of the simulation does.
ca="$SIM_TLS_DIR/ca.pem"
[ -f "$ca" ] || die "no $ca: sim/up.sh makes the simulation's CA (make sim-up), then converge (make sim-converge)"
client="$SIM_PREFIX-$(node_name "$SIM_NODES")"
for _ in 1 2 3 4 5 6; do
  docker exec -i "$client" curl -sf -m 120 --cacert /dev/stdin -o /dev/null "https://$PROXY/v1/chat/completions" \
    -H 'Content-Type: application/json' -H "Authorization: Bearer $key" \
    -d '{"model":"tiny-moe","messages":[{"role":"user","content":"hello"}],"max_tokens":16}' <"$ca" \
    || die "a request through the proxy at https://$PROXY failed"
done
# The engines the proxy fronts, as the plan put them in its backend (every replica, or a tensor-parallel group's
# head alone: a headless rank serves no API): "server NAME ADDRESS:PORT" lines of the first node's haproxy.cfg.
mapfile -t servers < <(docker exec "$SIM_PREFIX-$(node_name 1)" awk '/^backend vllm$/ {b = 1; next} /^backend / {b = 0}
  b && $1 == "server" {print $2 " " $3}' /etc/haproxy/haproxy.cfg)
[ "${#servers[@]}" -gt 0 ] || die "no server in the proxy's backend vllm on $(node_name 1)"
total_requests=0 total_tokens=0
printf '\n%-8s %-16s %10s %18s\n' node engine requests generated-tokens
for server in "${servers[@]}"; do
  read -r name address <<<"$server"
  metrics=$(docker exec "$client" curl -sf -m 10 "http://$address/metrics") || die "no /metrics on $name ($address)"
  requests=$(awk '/^vllm:request_success_total/ {s += $NF} END {printf "%d", s}' <<<"$metrics")
  tokens=$(awk '/^vllm:generation_tokens_total/ {s += $NF} END {printf "%d", s}' <<<"$metrics")
  printf '%-8s %-16s %10s %18s\n' "$name" "$address" "$requests" "$tokens"
  total_requests=$((total_requests + requests)) total_tokens=$((total_tokens + tokens))
done
printf '%-8s %-16s %10s %18s\n' all "(summed)" "$total_requests" "$total_tokens"
# The official openai client through the proxy (models, a completion, a stream, a tool call), from this machine, in
# the real engine's venv (sim/vllm_catalog/real_venv.sh, cached): make sim does it for the real-engine profiles.
if [ "${SIM_ASK_CLIENT:-0}" = 1 ]; then
  venv=$("$SIM_ROOT/vllm_catalog/real_venv.sh")
  replicas=()
  for server in "${servers[@]}"; do replicas+=(--replica "http://${server#* }"); done
  "$venv/bin/python" "$SIM_ROOT/vllm_catalog/ask_site.py" --proxy "https://$PROXY" --ca "$ca" --key "$key" \
    --model tiny-moe "${replicas[@]}" || die "the openai client's checks through https://$PROXY failed"
fi
cat <<MSG

The simulation is serving ($SIM_NODES nodes on $SIM_NETWORK $SIM_SUBNET, registry at $SIM_REGISTRY_IP:5000):
  the model, through the proxy:  docker exec -i $client curl -s --cacert /dev/stdin -H 'Authorization: Bearer $key' https://$PROXY/v1/models <$ca
  from this machine:             curl --cacert $ca -H 'Authorization: Bearer $key' https://$PROXY/v1/models
$(for i in $(seq 1 "$SIM_NODES"); do printf '  %-8s %-11s docker exec -it %s-%s bash\n' "$(node_name "$i")" "$(node_ip "$i")" "$SIM_PREFIX" "$(node_name "$i")"; done)
  a node's own engine:  docker exec $SIM_PREFIX-spark-1 docker ps
  earlyoom's own log:   docker exec $SIM_PREFIX-spark-1 journalctl -u earlyoom --no-pager
  the plan:             make plan SIM_PROFILE=${SIM_PROFILE:-sim-real}
  converge again:       make sim-converge      (a second run reports changed=0)
  remove it all:        make sim-down
MSG
