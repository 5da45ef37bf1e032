#!/usr/bin/env bash
# The real engine's 3.1 GB publish (sim/publish_image.sh with SIM_PUBLISH_REAL=1) beside other work: molecule
# default's converge and the first part of its served-site suite need only the stand-in, and the real engine is
# served first by test_90's switch, so its load into node 1 and its push (about 3 minutes, 4 under make test's load)
# need not hold up the critical path.
#   sim/publish_beside.sh start        starts the publish in its own session and returns at once
#   sim/publish_beside.sh wait [SECS]  waits for a publish this prefix started (default 1800 s); exits non-zero, with
#                                      the publish's last lines, where it failed or did not end in time; at once
#                                      where none was started (make sim publishes in the foreground)
# State: $SIM_BUILD/publish-real.$SIM_PREFIX.{pending,rc,log}.
source "$(dirname "$0")/lib/common.sh"
state="$SIM_BUILD/publish-real.$SIM_PREFIX"
here=$(cd "$(dirname "$0")" && pwd)

case "${1:-}" in
  start)
    require_docker
    mkdir -p "$SIM_BUILD"
    rm -f "$state.rc" "$state.log"
    : >"$state.pending"
    setsid nohup "$here/publish_beside.sh" run </dev/null >/dev/null 2>&1 &
    say "publishing the real engine beside (log: $state.log)"
    ;;
  run)  # the background part: its pid (setsid may fork), the publish, then its exit status where wait looks for it
    echo "$$" >"$state.pending"
    rc=0
    SIM_PUBLISH_REAL=1 "$here/publish_image.sh" >"$state.log" 2>&1 || rc=$?
    echo "$rc" >"$state.rc.tmp"
    mv "$state.rc.tmp" "$state.rc"
    rm -f "$state.pending"
    ;;
  wait)
    limit=${2:-1800}
    started=$(date +%s)
    while [ -f "$state.pending" ] && [ ! -f "$state.rc" ]; do
      [ $(($(date +%s) - started)) -lt "$limit" ] || { tail -n 20 "$state.log" >&2; die "the real engine's publish (prefix $SIM_PREFIX) did not end within $limit s: see $state.log"; }
      pid=$(cat "$state.pending" 2>/dev/null || true)
      if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null && [ ! -f "$state.rc" ]; then
        tail -n 20 "$state.log" >&2
        die "the real engine's publish (prefix $SIM_PREFIX, pid $pid) is gone without a result: see $state.log"
      fi
      sleep 2
    done
    if [ -f "$state.rc" ]; then
      rc=$(cat "$state.rc")
      [ "$rc" = 0 ] || { tail -n 20 "$state.log" >&2; die "the real engine's publish (prefix $SIM_PREFIX) failed (rc=$rc): see $state.log"; }
      say "the real engine is published (waited $(($(date +%s) - started)) s): $(grep -o 'registry:5000/gb10/vllm-cpu@sha256:[0-9a-f]*' "$state.log" | head -n1)"
    else
      say "no publish of the real engine beside for prefix $SIM_PREFIX: nothing to wait for"
    fi
    ;;
  *)
    die "usage: sim/publish_beside.sh start | wait [SECONDS]"
    ;;
esac
