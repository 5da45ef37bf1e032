#!/usr/bin/env bash
# Runs make targets as the stages of `make test`, each with its wall time, and ends with a one-line-per-stage
# summary, so every CI log shows where the time went. A stage written A+B+C runs those targets at the same time
# (each line of their output prefixed with its name) and waits for all of them. Stops after the first stage that
# fails; the summary is printed either way.
# Usage: scripts/stages.sh STAGE...   (MAKE names the make to call; the Makefile passes its own)
set -uo pipefail
make_cmd=${MAKE:-make}
summary=()
status=0
started=$(date +%s)

line() {  # line NAME SECONDS VERDICT
  summary+=("$(printf '%-22s %6d s %4d:%02d  %s' "$1" "$2" $(($2 / 60)) $(($2 % 60)) "$3")")
}

run_one() {  # run_one TARGET [PREFIX]: the target's exit status
  if [ -n "${2:-}" ]; then
    $make_cmd --no-print-directory "$1" 2>&1 | sed -u "s/^/[$1] /"
    return "${PIPESTATUS[0]}"
  fi
  $make_cmd --no-print-directory "$1"
}

for stage in "$@"; do
  printf '\n==> stage %s: started %s\n' "$stage" "$(date -u +%H:%M:%S)"
  t0=$(date +%s)
  IFS=+ read -r -a targets <<<"$stage"
  if [ "${#targets[@]}" -eq 1 ]; then
    run_one "$stage"
    rc=$?
  else
    marks=$(mktemp -d)
    pids=()
    for target in "${targets[@]}"; do
      (
        t1=$(date +%s)
        run_one "$target" prefix
        one=$?
        echo "$one $(($(date +%s) - t1))" >"$marks/$target"
        exit "$one"
      ) &
      pids+=($!)
    done
    wait "${pids[@]}"
    rc=0
    for target in "${targets[@]}"; do
      read -r one secs <"$marks/$target" || { one=1; secs=0; }
      verdict=ok
      [ "$one" -eq 0 ] || { verdict="FAILED (rc=$one)"; rc=$one; }
      printf '==> part %s of stage %s: %d s, %s\n' "$target" "$stage" "$secs" "$verdict"
      line "  $target" "$secs" "$verdict"
    done
    rm -rf "$marks"
  fi
  secs=$(($(date +%s) - t0))
  verdict=ok
  [ "$rc" -eq 0 ] || verdict="FAILED (rc=$rc)"
  printf '==> stage %s: %d s, %s\n' "$stage" "$secs" "$verdict"
  line "$stage" "$secs" "$verdict"
  if [ "$rc" -ne 0 ]; then
    status=$rc
    break
  fi
done
total=$(($(date +%s) - started))
printf '\n==> make test stages (wall time)\n'
printf '%s\n' "${summary[@]}"
printf '%-22s %6d s %4d:%02d\n' total "$total" $((total / 60)) $((total % 60))
exit "$status"
