#!/usr/bin/env bash
# Publishes the vLLM stand-in to the simulation's registry and records its digest for the inventory:
# docker save on this host | docker load in node 1's own engine, tag registry:5000/gb10/vllm-standin:0.32.0, push
# from inside node 1 (as a real site pushes), read the repository digest, and write
#   $GB10_SIM_IMAGES (default sim/build/images.yml):  gb10_sim_standin_digest: "sha256:<64 hex>"
# which inventories/sim/group_vars/all/sim_image.yml reads. The digest is a function of the image content only: the
# same image ID pushed from another node's engine or into another prefix's registry gives the same digest
# (measured; see standin/README.md), so one file serves every prefix. Idempotent: an image node 1 already holds is
# not loaded again, and the file is only rewritten when the digest changes.
source "$(dirname "$0")/lib/common.sh"
require_docker

STANDIN_IMAGE="${SIM_STANDIN_IMAGE:-gb10-sim/vllm-standin:0.32.0}"
REPOSITORY="${SIM_STANDIN_REPOSITORY:-registry:5000/gb10/vllm-standin}"
REFERENCE="$REPOSITORY:${STANDIN_IMAGE##*:}"
OUT="${GB10_SIM_IMAGES:-$SIM_BUILD/images.yml}"
node="$SIM_PREFIX-$(node_name 1)"

image_id=$(docker image inspect -f '{{.Id}}' "$STANDIN_IMAGE" 2>/dev/null) \
  || die "$STANDIN_IMAGE is missing: build it with sim/standin/build.sh (make sim-images)"
[ "$(docker inspect -f '{{.State.Running}}' "$node" 2>/dev/null)" = true ] \
  || die "node $node is not running: start the simulation with sim/up.sh (SIM_PREFIX=$SIM_PREFIX)"

held=$(docker exec "$node" docker image inspect -f '{{.Id}}' "$REFERENCE" 2>/dev/null || true)
if [ "$held" != "$image_id" ]; then
  say "loading $STANDIN_IMAGE into $node's engine"
  docker save "$STANDIN_IMAGE" | docker exec -i "$node" docker load -q >/dev/null \
    || die "docker load into $node failed"
  docker exec "$node" docker tag "$STANDIN_IMAGE" "$REFERENCE"
fi
docker exec "$node" docker push -q "$REFERENCE" >/dev/null 2>"$SIM_BUILD/publish.log" \
  || die "push of $REFERENCE from $node failed: see $SIM_BUILD/publish.log"
digest=$(docker exec "$node" docker image inspect -f '{{range .RepoDigests}}{{println .}}{{end}}' "$REFERENCE" \
  | sed -n "s#^$REPOSITORY@##p" | head -n1)
[[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || die "no repository digest for $REFERENCE after the push (got '$digest')"

content=$(printf -- '---\n# Written by sim/publish_image.sh: %s (image %s) as pushed to %s.\ngb10_sim_standin_digest: "%s"\n' \
  "$STANDIN_IMAGE" "${image_id:7:12}" "$REPOSITORY" "$digest")
if [ "$(cat "$OUT" 2>/dev/null)" != "$content" ]; then
  mkdir -p "$(dirname "$OUT")"
  printf '%s\n' "$content" >"$OUT.tmp" && mv "$OUT.tmp" "$OUT"
  say "wrote $OUT"
fi
say "stand-in published: $REPOSITORY@$digest"
