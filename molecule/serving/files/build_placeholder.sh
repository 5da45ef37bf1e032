#!/bin/sh
# Builds, inside a simulated node, a small image holding only the node's own python3 and the placeholder
# engine (as /usr/local/bin/vllm and /usr/local/bin/ray), pushes it to the simulation's registry and prints
# its reference by digest. Usage: build_placeholder.sh ENGINE_SCRIPT REPOSITORY
set -eu
engine=$1
repo=$2
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/usr/bin" "$root/usr/local/bin" "$root/tmp" "$root/etc"
cp -a /usr/bin/python3 /usr/bin/python3.11 "$root/usr/bin/"
tar -C / --exclude='usr/lib/python3.11/test' --exclude='*/__pycache__' -cf - usr/lib/python3.11 \
  | tar -C "$root" -xf -
for lib in $(ldd /usr/bin/python3.11 | awk '/\//{print ($3 ~ /^\//) ? $3 : $1}'); do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
cp /etc/hosts /etc/nsswitch.conf "$root/etc/" 2>/dev/null || true
install -m 0755 "$engine" "$root/usr/local/bin/vllm"
install -m 0755 "$engine" "$root/usr/local/bin/ray"
tar -C "$root" -cf - . | docker import -c 'ENTRYPOINT ["/usr/local/bin/vllm"]' - "$repo:placeholder" >/dev/null
docker push -q "$repo:placeholder" >/dev/null
docker image inspect -f '{{index .RepoDigests 0}}' "$repo:placeholder"
