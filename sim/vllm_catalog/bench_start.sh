#!/usr/bin/env bash
# make bench-engine-start (issue 36 item 2): what a restart of the real vLLM 0.32 CPU engine costs on this machine,
# serving the sim model with spark-1's planned argv (serve_real.sh), and what each candidate buys: vLLM's compile
# cache kept (VLLM_CACHE_ROOT, which roles/serving mounts from gb10_vllm_cache_dir, so a restart finds it) and
# --enforce-eager (no torch.compile, no CUDA-graph-style capture). Each start is cold (an empty cache) or warm (the
# cache the previous start of the same options left). Prints one line per start: seconds to /health 200 and the
# openai client's checks after it (the first completion pays what the start deferred).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${BENCH_OUT:-$repo/sim/build/bench-engine-start}"
rm -rf "$out" && mkdir -p "$out"
results=()
for mode in default eager; do
  extra=""
  [ "$mode" = eager ] && extra="--extra=--enforce-eager"
  for run in cold warm; do
    log="$out/$mode-$run.log"
    verdict=ok
    SERVE_REAL_OUT="$out/$mode-$run" SERVE_REAL_ARGS="--cache-root $out/cache-$mode $extra" \
      "$here/serve_real.sh" >"$log" 2>&1 || verdict="FAILED: $(grep -m1 'FAILED' "$log" | cut -c1-160)"
    line=$(grep -m1 '/health 200 after' "$log" | sed 's/.*: \/health/\/health/' || true)
    results+=("$(printf '%-8s %-5s %s; %s' "$mode" "$run" "${line:-no /health 200}" "$verdict")")
  done
done
printf '[bench] the real vLLM 0.32 CPU engine, the sim model, %s cores:\n' "$(nproc)"
printf '[bench]   %s\n' "${results[@]}"
