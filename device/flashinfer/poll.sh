#!/usr/bin/env bash
# Device run, part 2: after SLEEP seconds, report the prebuild's progress and copy the measurements to $OUT.
# Usage: device/flashinfer/poll.sh SLEEP [ARCHDIR] [MODULE]
set -u
sleep "$1"; S=/var/tmp/gb10; A=${2:-90a}; M=${3:-fused_moe_90}; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
shopt -s nullglob; builds=("$S"/ws/.cache/flashinfer/*/"$A"/cached_ops/"$M"); shopt -u nullglob
B=${builds[0]:-}
echo "elapsed $(( $(date -u +%s) - $(cat "$S/started") )) s since start; build dir $B"
pgrep -f flashinfer_prebuild.py >/dev/null && echo "prebuild running" || echo "prebuild NOT running"
grep -c 'FAILED' "$S/prebuild.out"; grep -m3 -B2 -A8 'FAILED' "$S/prebuild.out" | cut -c1-300
cut -c1-300 "$S/prebuild.out" | grep -v '^\[' | tail -8
python3 device/flashinfer/summarize.py "$B" "$S/sampler" | tee "$OUT/summary.txt"
free -m | head -2; ls -la "$B"/*.so 2>/dev/null
cp "$S/sampler/peaks.csv" "$S/sampler/totals.csv" "$S/max_jobs.txt" "$OUT/" 2>/dev/null
cp "$B/.ninja_log" "$OUT/ninja_log.tsv" 2>/dev/null; cp "$B/gb10-prebuild.json" "$OUT/" 2>/dev/null
gzip -c "$S/sampler/samples.csv" > "$OUT/samples.csv.gz"; gzip -c "$S/prebuild.out" > "$OUT/prebuild.out.gz"
