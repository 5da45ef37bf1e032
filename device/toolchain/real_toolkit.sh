#!/usr/bin/env bash
# Device run: roles/serving_image/files/toolchain_gaps.py against the machine's real CUDA toolkit and the real CUDA 13
# wheels its torch installed, with flashinfer-python 0.6.18's own source for the flags (issue 17, item 6).
# The toolkit is not changed: CUDA_HOME is a tree of symlinks to it (cp -as), so the fix's links land in that tree.
# Usage: device/toolchain/real_toolkit.sh WHEEL_DIR   (WHEEL_DIR holds flashinfer_python-0.6.18-py3-none-any.whl)
set -u
WHEELS=$1 OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
TG=roles/serving_image/files/toolchain_gaps.py
echo "== inventory"; date -u; python3 -V; command -v python3 nvcc c++; nvcc --version | tail -2; c++ --version | head -1
real=$(readlink -f "$(dirname "$(dirname "$(command -v nvcc)")")"); echo "toolkit: $real"
stat -c '%N' "$real/lib64"; python3 <"$real/version.json" -c 'import json,sys; print("version.json cuda", json.load(sys.stdin)["cuda"]["version"])'
echo "toolkit nvrtc:"; find "$real/lib64/" "$real/include/" -maxdepth 1 -name '*nvrtc*' | sort
site=$(python3 -c 'import site; print(site.getsitepackages()[0])'); echo "site: $site"
python3 -c 'import torch; print("torch", torch.__version__)' 2>&1 | tail -1
echo "wheel cu13:"; find "$site"/nvidia/cu13/lib "$site"/nvidia/cu13/include -maxdepth 1 -name '*nvrtc*' | sort
pip_show=$(python3 -m pip show nvidia-cuda-nvrtc 2>/dev/null | grep -E '^(Name|Version)'); echo "$pip_show"
echo "== flashinfer 0.6.18 (--no-deps --target /tmp/fi)"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/fi "$WHEELS"/flashinfer_python-0.6.18-py3-none-any.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/fi
H=/tmp/cudahome; rm -rf "$H"; cp -as "$real/." "$H/"
# STRIP_NVRTC=1: the toolkit's own nvrtc left out of the tree (the shape of a toolkit installed without it, as on the
# H200 host of issue 17), so nvrtc comes only from the wheel, where the fix has to find it.
if [ "${STRIP_NVRTC:-0}" = 1 ]; then
  find "$H/" \( -name 'libnvrtc*' -o -name 'nvrtc*.h' \) \( -type l -o -type f \) -print -delete | sed 's/^/stripped: /'
fi
echo "== unfixed: $TG --cuda-home $H --lib nvrtc"
python3 "$TG" --cuda-home "$H" --lib nvrtc >"$OUT/unfixed.json" 2>"$OUT/unfixed.err"; echo "rc=$?"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("flags_source:", r["flags_source"]); print("check:", r["check"]["ok"], r["check"]["stage"]); print(r["check"]["output"]); print("found headers:", r["found"]["headers"][:3], "libraries:", r["found"]["libraries"])' "$OUT/unfixed.json"
echo "== apply: $TG --cuda-home $H --lib nvrtc --apply"
python3 "$TG" --cuda-home "$H" --lib nvrtc --apply >"$OUT/applied.json" 2>"$OUT/applied.err"; echo "rc=$?"; cat "$OUT/applied.err"
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); a=dict(r["applied"]); print("applied:", len(a), {k: v for k, v in a.items() if "nvrtc" in k}); print("remaining:", r["remaining"]); print("check:", r["check"]["ok"], r["check"]["stage"], " ".join(r["check"]["command"][2:]))' "$OUT/applied.json"
echo "== the same line with the real nvcc as driver, and a program run"
printf '#include <cstdio>\n#include <nvrtc.h>\nint main(){int a=0,b=0; if(nvrtcVersion(&a,&b)!=NVRTC_SUCCESS) return 1; std::printf("nvrtc %%d.%%d\\n",a,b); return 0;}\n' >/tmp/nv.cu
nvcc -std=c++17 -isystem "$H/include" /tmp/nv.cu -o /tmp/nv "-L$H/lib64" "-L$H/lib64/stubs" -lcudart -lcuda -lnvrtc; echo "nvcc link rc=$?"
LD_LIBRARY_PATH=$site/nvidia/cu13/lib /tmp/nv; echo "run rc=$?"
readelf -d /tmp/nv | grep NEEDED
echo "== again (idempotent)"; python3 "$TG" --cuda-home "$H" --lib nvrtc --apply | python3 -c 'import json,sys; r=json.load(sys.stdin); print("applied", r["applied"], "check", r["check"]["ok"])'; echo "rc=${PIPESTATUS[0]}"
