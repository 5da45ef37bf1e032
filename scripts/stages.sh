#!/usr/bin/env bash
# Runs make targets one after another as the stages of `make test`, each with its wall time, and ends with a
# one-line-per-stage summary, so every CI log shows where the time went. Stops at the first stage that fails.
# Usage: scripts/stages.sh TARGET...   (MAKE names the make to call; the Makefile passes its own)
set -uo pipefail
make_cmd=${MAKE:-make}
summary=()
status=0
started=$(date +%s)
for stage in "$@"; do
  printf '\n==> stage %s: started %s\n' "$stage" "$(date -u +%H:%M:%S)"
  t0=$(date +%s)
  $make_cmd --no-print-directory "$stage"
  rc=$?
  secs=$(($(date +%s) - t0))
  verdict=ok
  [ "$rc" -eq 0 ] || verdict="FAILED (rc=$rc)"
  printf '==> stage %s: %d s, %s\n' "$stage" "$secs" "$verdict"
  summary+=("$(printf '%-12s %6d s  %3d:%02d  %s' "$stage" "$secs" $((secs / 60)) $((secs % 60)) "$verdict")")
  if [ "$rc" -ne 0 ]; then
    status=$rc
    break
  fi
done
total=$(($(date +%s) - started))
printf '\n==> make test stages (wall time)\n'
printf '%s\n' "${summary[@]}"
printf '%-12s %6d s  %3d:%02d\n' total "$total" $((total / 60)) $((total % 60))
exit "$status"
