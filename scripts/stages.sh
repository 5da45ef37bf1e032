#!/usr/bin/env bash
# Runs make targets as the stages of `make test`, each with its wall time, and ends with a one-line-per-stage
# summary, so every CI log shows where the time went.
#   A+B+C   one stage whose parts run at the same time (each line of their output prefixed with its target's name);
#           the stage waits for all of them.
#   A,B,C   one part that runs its targets one after the other, each timed, stopping at the first that fails.
#   ~A      a part that runs at lower CPU priority, so that the part on the critical path, left at normal priority,
#           gets the cores first and the others take what it leaves idle: nice 10 for its own processes, and
#           SIM_CPU_SHARES=256 (a quarter of Docker's default weight) for the simulated nodes it starts (sim/up.sh).
# Stops after the first stage that fails; the summary is printed either way.
# Usage: scripts/stages.sh STAGE...   (MAKE names the make to call; the Makefile passes its own)
set -uo pipefail
make_cmd=${MAKE:-make}
summary=()
failures=()
status=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Every pytest run below appends its failed tests here, a line each (tests/conftest.py); printed last.
export GB10_FAILED_TESTS="$work/failed-tests.txt"
started=$(date +%s)

line() {  # line NAME SECONDS VERDICT
  summary+=("$(printf '%-22s %6d s %4d:%02d  %s' "$1" "$2" $(($2 / 60)) $(($2 % 60)) "$3")")
}

run_one() {  # run_one TARGET [LOG]: the target's exit status; with LOG, its lines prefixed and kept in LOG too
  if [ -n "${2:-}" ]; then
    $make_cmd --no-print-directory "$1" 2>&1 | sed -u "s/^/[$1] /" | tee "$2"
    return "${PIPESTATUS[0]}"
  fi
  $make_cmd --no-print-directory "$1"
}

run_chain() {  # run_chain MARKS PART: the part's targets in order, each timed into MARKS/<target>
  local marks=$1 part=${2#\~} target t1 one=0
  IFS=, read -r -a chain <<<"$part"
  for target in "${chain[@]}"; do
    t1=$(date +%s)
    run_one "$target" "$marks/$target.log"
    one=$?
    echo "$one $(($(date +%s) - t1))" >"$marks/$target"
    [ "$one" -eq 0 ] || break
  done
  return "$one"
}

for stage in "$@"; do
  printf '\n==> stage %s: started %s\n' "$stage" "$(date -u +%H:%M:%S)"
  t0=$(date +%s)
  IFS=+ read -r -a parts <<<"$stage"
  if [ "${#parts[@]}" -eq 1 ] && [[ "$stage" != *,* && "$stage" != \~* ]]; then
    run_one "$stage"
    rc=$?
  else
    marks=$(mktemp -d -p "$work")
    pids=()
    for part in "${parts[@]}"; do
      if [[ "$part" == \~* ]]; then
        (renice -n 10 -p "$BASHPID" >/dev/null && export SIM_CPU_SHARES=256 && run_chain "$marks" "$part") &
      else
        run_chain "$marks" "$part" &
      fi
      pids+=($!)
    done
    wait "${pids[@]}"
    rc=0
    for part in "${parts[@]}"; do
      IFS=, read -r -a chain <<<"${part#\~}"
      for target in "${chain[@]}"; do
        if [ -f "$marks/$target" ]; then
          read -r one secs <"$marks/$target"
          verdict=ok
          [ "$one" -eq 0 ] || { verdict="FAILED (rc=$one)"; rc=$one; }
        else
          one=0 secs=0 verdict="not run (an earlier target of its part failed)"
        fi
        # A failed part's own words go last, after the summary, where a log cut to its tail still shows them.
        [ "$one" -eq 0 ] || failures+=("$marks/$target.log")
        printf '==> part %s of stage %s: %d s, %s\n' "$target" "$stage" "$secs" "$verdict"
        line "  $target" "$secs" "$verdict"
      done
    done
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
for log in "${failures[@]}"; do
  printf '\n==> why %s failed: its lines that name a failure (at most 40), then its last 20 lines\n' \
    "$(basename "$log" .log)"
  grep -E 'FAILED|ERROR|Error|fatal:|failed=[1-9]|^\[[^]]*\] E ' "$log" | grep -v 'FAILED - RETRYING' | tail -n 40
  echo '    ...'
  tail -n 20 "$log"
done
# Last, where a log cut to its final lines still shows them: the tests that failed, whichever stage ran them (the
# served-site suite's own output reaches this log inside one Ansible message).
if [ -s "$GB10_FAILED_TESTS" ]; then
  printf '\n==> the tests that failed (%d), a line each\n' "$(wc -l <"$GB10_FAILED_TESTS")"
  cut -c1-400 "$GB10_FAILED_TESTS"
fi
exit "$status"
