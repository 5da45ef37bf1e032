#!/usr/bin/env bash
# Issue 42 on a lent GPU: GB10's fused-MoE module (compute capability 12.1) built by the role's own entry point with
# the environment the plan renders for the example GLM profile, the serving role's identity check run as the role
# runs it, a fresh serving-call load, then one changed input refused and rebuilt.
#   start  WHEEL_DIR LIMIT_MIB  install, MAX_JOBS by the role's formula, prebuild + /proc sampler detached, follow
#   follow SECONDS              follow the build (progress a minute)
#   finish                      wait for the build, then the identity checks, the loads and the changed input
# WHEEL_DIR holds the wheels and the rendered engine.env/build.env (device/flashinfer/render_envs.yml).
set -u
S=/var/tmp/gb10; OUT=${OUT:-/tmp/out}; mkdir -p "$S/sampler" "$OUT"
WS=/root/.cache/flashinfer-workspace          # the container path both env files name (FLASHINFER_WORKSPACE_BASE)
ENTRY=$PWD/roles/flashinfer_jit/files/flashinfer_prebuild.py
EXEC=$PWD/device/flashinfer/env_file_exec.py
export PYTHONPATH=/tmp/site:/tmp/gb10-ac PYTHONUNBUFFERED=1
PY=${PY:-python3}   # the python that holds torch (the image's)

log() { echo "== $(date -u +%T) $*"; }

build_dir() { find "$WS/.cache/flashinfer" -maxdepth 4 -type d -name fused_moe_120 2>/dev/null | head -1; }

progress() {
  local b; b=$(build_dir)
  echo "elapsed $(( $(date -u +%s) - $(cat "$S/started") )) s; steps done $(grep -vc '^#' "$b/.ninja_log" 2>/dev/null || echo 0)/$(grep -c '^build ' "$b/build.ninja" 2>/dev/null || echo '?'); $(grep -c FAILED "$S/prebuild.out") FAILED; $(awk '/MemAvailable/ {print int($2/1024)}' /proc/meminfo) MiB available"
}

follow() {  # $1: seconds at most; returns early when the build has its result line
  local until=$(( $(date -u +%s) + $1 ))
  while (( $(date -u +%s) < until )); do
    grep -q '^GB10_PREBUILD_RESULT' "$S/prebuild.out" && break
    progress; sleep 60
  done
  progress; grep '^GB10_PREBUILD_RESULT' "$S/prebuild.out" | cut -c1-1500
}

identity() {  # $1: label; $2: engine.env to use; the serving role's module, run as the role runs it
  local scratch=/run/gb10/fi-$1; mkdir -p "$scratch"; chmod 700 "$scratch"
  python3 - "$scratch" "$2" "$(cat "$S/digest")" "$EXEC" "$ENTRY" "$WS" "$PY" > "$S/args-$1.json" <<'PY'
import json, sys
scratch, env_path, digest, exec_, entry, ws, py = sys.argv[1:]
print(json.dumps({"ANSIBLE_MODULE_ARGS": {
    "node": "gpu-device", "cache_dir": ws, "image": digest, "scratch_dir": scratch,
    # Where the role has `docker run --env-file <scratch>/engine.env ... IMAGE python3 ENTRY --ninja-only`.
    "argv": [py, exec_, f"{scratch}/engine.env", "--", py, entry, "--ninja-only"],
    "env_files": [{"path": f"{scratch}/engine.env", "content": open(env_path).read()}]}}))
PY
  log "identity check ($1)"
  "$PY" -m ansible_collections.gb10.serving.plugins.modules.flashinfer_jit_identity "$S/args-$1.json" \
    | tee "$OUT/identity-$1.json" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("failed" if d.get("failed") else "ok", "|", d.get("msg") or d.get("message"))' | cut -c1-1800
}

load() {  # $1: label; $2: engine.env: vLLM's call in a fresh process, the serving environment as it is
  # No FLASHINFER_JIT_VERBOSE here: alone it makes flashinfer 0.6.18 write a debug build.ninja (it stands in for
  # FLASHINFER_JIT_DEBUG when that is unset), and the first device run's load rebuilt all 97 units that way.
  # ninja's own verdict instead: `ninja -n` on the cache, .ninja_log's lines and the .so's mtime before and after.
  local b; b=$(build_dir); local before mtime; before=$(grep -vc '^#' "$b/.ninja_log"); mtime=$(stat -c %Y "$b"/*.so)
  log "ninja -n on the cache ($1)"; (cd "$b" && timeout 30 ninja -n -f build.ninja | tail -1) | tee "$OUT/ninja-n-$1.txt"
  log "fresh serving-call load ($1, timeout 120 s)"
  # FLASHINFER_CUDA_ARCH_LIST stands in for the GB10's GPU (the H100/H200 would give 9.0); the prebuild sets the same.
  /usr/bin/time -f "load wall %e s, max RSS %M KiB" timeout 120 "$PY" "$EXEC" "$2" FLASHINFER_CUDA_ARCH_LIST=12.1 -- \
    "$PY" "$ENTRY" --child --compute-capability 12.1 > "$OUT/load-$1.txt" 2>&1
  echo "rc=$?"; tail -3 "$OUT/load-$1.txt" | cut -c1-300
  echo "ninja_log entries: $before before, $(grep -vc '^#' "$b/.ninja_log") after; .so mtime $mtime -> $(stat -c %Y "$b"/*.so)"
}

setup() {  # the collection importable (the identity module), the rendered env files and the image digest in $S
  mkdir -p /tmp/gb10-ac/ansible_collections/gb10; ln -sfn "$PWD" /tmp/gb10-ac/ansible_collections/gb10/serving
  sed -n 's/^GB10_IMAGE_DIGEST=//p' "$W/build.env" > "$S/digest"; cp "$W"/engine.env "$W"/build.env "$S/"
}

changed_inputs() {  # each must be refused before any unit starts, naming the differing build.ninja line
  # `echo;` first: the rendered env files end without a newline, and the first rerun's appended line joined the last
  # one (VLLM_HOST_IP=...FLASHINFER_EXTRA_LDFLAGS=...), so the "rebuild" saw no change and said present.
  log "changed input 1: FLASHINFER_EXTRA_LDFLAGS=-Wl,-O1 in the serving environment (flashinfer/jit/cpp_ext.py reads it into ldflags)"
  { cat "$S/engine.env"; echo; echo "FLASHINFER_EXTRA_LDFLAGS=-Wl,-O1"; } > "$S/engine-ldflags.env"
  identity ldflags "$S/engine-ldflags.env"
  log "changed input 2: CUDA_HOME through another path to the same toolkit"
  real=$(dirname "$(dirname "$(readlink -f "$(which nvcc)")")"); ln -sfn "$real" /opt/cuda-alt
  { cat "$S/engine.env"; echo; echo "CUDA_HOME=/opt/cuda-alt"; } > "$S/engine-cudahome.env"
  identity cudahome "$S/engine-cudahome.env"
}

case "$1" in
start)
  W=$2
  log inventory; python3 -V; which python3 nvcc ninja; echo "CUDA_HOME=${CUDA_HOME:-unset} CC=${CC:-unset} CXX=${CXX:-unset}"
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "cc", torch.cuda.get_device_capability(0), torch.cuda.get_device_name(0))'
  nvcc --version | tail -2; ninja --version; nproc; free -m | head -2; nvidia-smi -L; uname -m
  log install
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$W"/*.whl 2>&1 | tail -2
  setup
  python3 -c 'import flashinfer, ansible; print("flashinfer", flashinfer.__version__, "ansible-core", ansible.__path__)' || exit 1
  log "MAX_JOBS (the role's formula, roles/flashinfer_jit: plugins/module_utils/_flashinfer_jit/job_sizing.py max_jobs)"
  python3 device/flashinfer/max_jobs.py --limit-mib "$3" | tee "$S/max_jobs.txt"
  J=$(tail -1 "$S/max_jobs.txt"); echo "$J" > "$S/jobs"
  log "start the prebuild: build.env + MAX_JOBS=$J"
  date -u +%s > "$S/started"
  setsid nohup "$PY" "$EXEC" "$S/build.env" "MAX_JOBS=$J" -- "$PY" "$ENTRY" >"$S/prebuild.out" 2>&1 </dev/null &
  setsid nohup python3 device/flashinfer/sampler.py "$S/sampler" 1 >/dev/null 2>&1 </dev/null &
  sleep 20; grep -v '^\[' "$S/prebuild.out" | cut -c1-300 | head -5
  follow "${4:-480}" ;;
follow) follow "$2" ;;
rehearse)  # here, no GPU, no compile: the build.ninja the prebuild would write, stamped, then the identity checks
  W=$2; setup
  "$PY" "$EXEC" "$S/build.env" -- "$PY" "$ENTRY" --ninja-only --compute-capability 12.1 | "$PY" -c '
import hashlib, json, os, sys
line = [l for l in sys.stdin if l.startswith("GB10_PREBUILD_NINJA ")][-1]
found = json.loads(line.split(" ", 1)[1]); d = os.path.dirname(found["path"]); os.makedirs(d, exist_ok=True)
open(found["path"], "w").write(found["text"])
digest = open(sys.argv[1]).read().strip()
json.dump({"image_digest": digest, "compute_capability": "12.1", "module": found["module"],
           "ninja_sha256": hashlib.sha256(found["text"].encode()).hexdigest()},
          open(os.path.join(d, "gb10-prebuild.json"), "w"))
print("rehearsal stamp in", d)' "$S/digest"
  identity same "$S/engine.env"
  changed_inputs ;;
finish)
  follow "${2:-60}"
  grep -q '^GB10_PREBUILD_RESULT' "$S/prebuild.out" || { echo "still building: run finish again"; exit 4; }
  grep -q '"status": "built"\|"status": "present"' "$S/prebuild.out" || { grep -m5 -A5 FAILED "$S/prebuild.out" | cut -c1-400; exit 3; }
  b=$(build_dir); python3 device/flashinfer/summarize.py "$b" "$S/sampler" | tee "$OUT/summary.txt"
  cp "$b/gb10-prebuild.json" "$OUT/stamp-first.json"; ls -la "$b"/*.so
  identity same "$S/engine.env"
  changed_inputs
  load same "$S/engine.env"
  log "rebuild through the role's entry point with the changed input in the profile's env (both env files get it)"
  { cat "$S/build.env"; echo; echo "FLASHINFER_EXTRA_LDFLAGS=-Wl,-O1"; } > "$S/build-ldflags.env"
  /usr/bin/time -f "rebuild wall %e s" timeout 200 "$PY" "$EXEC" "$S/build-ldflags.env" "MAX_JOBS=$(cat "$S/jobs")" -- \
    "$PY" "$ENTRY" > "$S/rebuild.out" 2>&1
  echo "ninja steps run: $(grep -c '^\[' "$S/rebuild.out")"; grep '^\[' "$S/rebuild.out" | cut -c1-140 | tail -3
  grep '^GB10_PREBUILD_RESULT' "$S/rebuild.out" | grep -o '"status": "[a-z]*"' 
  cp "$b/gb10-prebuild.json" "$OUT/stamp-rebuilt.json"
  identity ldflags-after "$S/engine-ldflags.env"
  identity same-after "$S/engine.env"
  load ldflags-after "$S/engine-ldflags.env"
  tar czf "$OUT/logs.tgz" -C "$S" prebuild.out rebuild.out max_jobs.txt sampler/peaks.csv sampler/totals.csv \
    -C "$b" .ninja_log build.ninja gb10-prebuild.log 2>/dev/null
  # One archive: the device tool brings back a few files only.
  (cd "$OUT" && tar czf results.tgz --exclude=results.tgz --exclude=logs.tgz . ; find . -type f ! -name '*.tgz' -delete)
  log "done" ;;
esac
