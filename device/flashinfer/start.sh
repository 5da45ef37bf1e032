#!/usr/bin/env bash
# Device run, part 1: inventory, install the carried wheels, start the fused-MoE prebuild detached with MAX_JOBS
# from the role's formula and a /proc RSS sampler, then prove the JIT cache on a small module (build, then load in a
# fresh process). Usage: device/flashinfer/start.sh WHEEL_DIR LIMIT_MIB COMPUTE_CAPABILITY
set -u
WHEELS=$1 LIMIT=$2 CCAP=$3
S=/var/tmp/gb10; mkdir -p "$S/sampler"; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
echo "== inventory"; date -u; python3 -V; which python3 nvcc ninja
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count(), "cc", torch.cuda.get_device_capability(0))'
nvcc --version | tail -2; ninja --version; nproc; free -m; df -h /var/tmp | tail -1; nvidia-smi -L
find /usr/local/cuda/lib64 -maxdepth 1 -name 'libnvrtc.so*' 2>&1 | sort | head -3
echo "== install"; python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$WHEELS"/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site
if ! python3 -c 'import flashinfer; print("import flashinfer", flashinfer.__version__)' 2>"$S/import.err"; then
  tail -3 "$S/import.err"; echo "full import failed: using device/flashinfer/shim"
  export PYTHONPATH=$PWD/device/flashinfer/shim:/tmp/site
fi
python3 -c 'import flashinfer.jit.fused_moe, flashinfer.jit.env as e; print("jit ok", e.flashinfer_version)' || exit 1
echo "== MAX_JOBS"; python3 device/flashinfer/max_jobs.py --limit-mib "$LIMIT" | tee "$S/max_jobs.txt"
J=$(tail -1 "$S/max_jobs.txt")
echo "== start prebuild MAX_JOBS=$J"
export FLASHINFER_WORKSPACE_BASE=$S/ws MAX_JOBS=$J FLASHINFER_JIT_DEBUG=0
date -u +%s > "$S/started"
setsid nohup python3 roles/flashinfer_jit/files/flashinfer_prebuild.py --compute-capability "$CCAP" --image-digest bare-h200 >"$S/prebuild.out" 2>&1 < /dev/null &
setsid nohup python3 device/flashinfer/sampler.py "$S/sampler" 1 >/dev/null 2>&1 < /dev/null &
echo "== cache proof (small module, own cache, MAX_JOBS=2)"
export FLASHINFER_WORKSPACE_BASE=$S/small MAX_JOBS=2
for phase in build load load; do
  a=$(date +%s.%N); python3 device/flashinfer/cache_proof.py "$phase" 2>&1 | tail -3; b=$(date +%s.%N)
  echo "process wall $phase: $(python3 -c "print(round($b-$a,2))") s"
done
# shellcheck disable=SC2012  # a long listing for the person reading the run's output; nothing parses it
ls -la "$S"/small/.cache/flashinfer/*/*/cached_ops/*/ | head -20
find "$S/small" -maxdepth 5 | head -20
echo "== prebuild so far"; cut -c1-400 "$S/prebuild.out" | tail -5
