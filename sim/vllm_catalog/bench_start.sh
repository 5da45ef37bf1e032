#!/usr/bin/env bash
# make bench-engine-start (issue 36 item 2): what a restart of the real vLLM 0.32 CPU engine costs on this machine,
# serving the sim model with spark-1's planned argv of BENCH_PROFILE (default sim-real, the profile the simulation
# serves this engine with; serve_real.sh), and what each candidate buys. "cache" is the profile as it is (sim-real:
# compilation mode 0, no AOT artifact) with vLLM's cache kept (VLLM_CACHE_ROOT, which roles/serving mounts from
# gb10_vllm_cache_dir, so a restart finds it); "compiled" is vLLM's default compile (mode 3, which the CPU platform
# turns into dynamo with inductor) under the profile's environment (the planned environment wins over the
# caller's, so the AOT artifact stays off: measured before, sim/vllm_catalog/README.md); "eager" --enforce-eager;
# "ci-env" vLLM's own CPU CI setting
# (VLLM_CPU_CI_ENV=1: dynamo with the eager backend, no warm-up) with the default compile. Each candidate starts cold
# (an empty cache) then warm (the cache the cold start left), serving one snapshot path as a node's restarts do:
# the compile cache is keyed by the model's path among others. Prints one line per start: seconds to /health 200,
# the openai client's checks after it, and what vLLM's log says of its AOT compile cache (loaded, or compiled
# again and why). The starts run one after another: other work on the machine lengthens every start, so compare
# lines of one run, and say what ran beside it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
out="${BENCH_OUT:-$repo/sim/build/bench-engine-start}"
profile="${BENCH_PROFILE:-sim-real}"
rm -rf "$out" && mkdir -p "$out"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
results=()
# candidate name | environment words | serve_real.py words
candidates=(
  "cache||"
  "compiled||--extra=--compilation-config={\"mode\":3}"
  "eager||--extra=--enforce-eager"
  "ci-env|VLLM_CPU_CI_ENV=1|--extra=--compilation-config={\"mode\":3}"
)
for candidate in "${candidates[@]}"; do
  IFS='|' read -r mode envs extra <<<"$candidate"
  # BENCH_CANDIDATES (default all): the names to run, e.g. "cache compiled"
  [[ " ${BENCH_CANDIDATES:-cache compiled eager ci-env} " == *" $mode "* ]] || continue
  for run in cold warm; do
    log="$out/$mode-$run.log"
    verdict=ok
    # shellcheck disable=SC2086  # envs and extra are lists of words on purpose
    # An empty inductor cache at every start, as a serving container's /tmp is (--rm: a new container each start;
    # roles/serving mounts vLLM's cache, not /tmp): inductor's default /tmp/torchinductor_<user> on this host would
    # hand every start after the first the C++ kernels the first compiled.
    env $envs TORCHINDUCTOR_CACHE_DIR="$out/inductor-$mode-$run" SERVE_REAL_PROFILE="$profile" SERVE_REAL_OUT="$out/$mode-$run" SERVE_REAL_SNAPSHOT="$out/snapshot" \
      SERVE_REAL_ARGS="--cache-root $out/cache-$mode $extra" "$here/serve_real.sh" >"$log" 2>&1 \
      || verdict="FAILED: $(grep -m1 'FAILED' "$log" | cut -c1-160)"
    line=$(grep -m1 '/health 200 after' "$log" | sed 's/.*: \/health/\/health/' || true)
    engine_log=$(find "$out/$mode-$run" -name "sim.$profile.*.log" | head -n 1)
    aot="no AOT artifact"
    if [ -n "$engine_log" ] && grep -q 'Directly load AOT compilation' "$engine_log"; then
      aot="AOT artifact loaded"
    elif [ -n "$engine_log" ] && grep -q 'Compiling model again due to a load failure' "$engine_log"; then
      aot="AOT artifact not loaded: $(grep -m1 -o 'reason: .*' "$engine_log" | cut -c1-90)"
    elif [ -n "$engine_log" ] && grep -q 'saved AOT compiled function' "$engine_log"; then
      aot="compiled, AOT artifact saved"
    fi
    results+=("$(printf '%-7s %-5s %s; %s; %s' "$mode" "$run" "${line:-no /health 200}" "$aot" "$verdict")")
  done
done
printf '[bench] the real vLLM 0.32 CPU engine, the sim model, profile %s, %s cores (load average %s before, %s after):\n' \
  "$profile" "$(nproc)" "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)"
printf '[bench]   %s\n' "${results[@]}"
