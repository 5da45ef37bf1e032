#!/usr/bin/env bash
# Publishes the vLLM stand-in and its next release (sim/standin/build.sh) to the simulation's registry and records
# their digests for the inventory: docker save on this host | docker load in node 1's own engine, tag
# registry:5000/gb10/vllm-standin:<tag>, push from inside node 1 (as a real site pushes), read the repository
# digest, and write
#   $GB10_SIM_IMAGES (default sim/build/images.yml):
#     gb10_sim_standin_digest: "sha256:<64 hex>"        the image every sim profile serves
#     gb10_sim_standin_next_digest: "sha256:<64 hex>"   the target of a rolling upgrade to a new image (issue 17)
#     gb10_sim_real_digest: "sha256:<64 hex>"            the real vLLM 0.32.0 CPU engine (sim/vllm_cpu), which the
#                                                        sim-real profile serves: pushed only with SIM_PUBLISH_REAL=1
#                                                        (3.1 GB; make sim with SIM_PROFILE=sim-real), else the
#                                                        file's earlier value is kept
#     gb10_sim_real_next_digest: "sha256:<64 hex>"       its next release, the same layers under a new label, built
#                                                        in node 1's engine (no second 3.1 GB transfer)
#     gb10_sim_real_prev_digest: "sha256:<64 hex>"       the real vLLM 0.31.0 CPU engine (sim/vllm_cpu/build.sh with
#                                                        SIM_VLLM_CPU_VERSION=0.31.0), which the sim-real-031 profile
#                                                        serves and a release upgrade rolls to 0.32.0 from: pushed only
#                                                        with SIM_PUBLISH_REAL_PREV=1 (another 3.1 GB; make sim with
#                                                        SIM_PROFILE=sim-real-031), else the earlier value is kept
# which inventories/sim/group_vars/all/sim_image.yml reads. The digest is a function of the image content only: the
# same image ID pushed from another node's engine or into another prefix's registry gives the same digest
# (measured; see standin/README.md), so one file serves every prefix. Idempotent: an image node 1 already holds is
# not loaded again, and the file is only rewritten when a digest changes.
# The registry cache: a publish into an empty registry (every fresh simulation: make sim, molecule's prepare, the
# integration suites) keeps the registry's storage afterwards under GB10_SIM_REGISTRY_CACHE (default
# ~/.cache/gb10-serving/registry), keyed by the Ids of the images it published and what it published; the next
# publish of the same images into an empty registry copies that storage in and reads the digests it recorded,
# instead of loading each image into node 1 and pushing it (the real engine alone: 3.1 GB, 2 min 54 s on an idle
# machine). Node 1 then holds none of them: the first run that builds on one pulls it from the registry, as every
# other node does. Blobs are content-addressed and checked by digest on every pull. GB10_SIM_REGISTRY_CACHE=off
# turns it off.
source "$(dirname "$0")/lib/common.sh"
require_docker

STANDIN_IMAGE="${SIM_STANDIN_IMAGE:-gb10-sim/vllm-standin:0.32.0}"
NEXT_IMAGE="${SIM_STANDIN_NEXT_IMAGE:-$STANDIN_IMAGE-next}"
REPOSITORY="${SIM_STANDIN_REPOSITORY:-registry:5000/gb10/vllm-standin}"
REAL_IMAGE="${SIM_VLLM_CPU_IMAGE:-gb10-sim/vllm-cpu:0.32.0}"
REAL_REPOSITORY="${SIM_REAL_REPOSITORY:-registry:5000/gb10/vllm-cpu}"
REAL_PREV_IMAGE="${SIM_VLLM_CPU_PREV_IMAGE:-gb10-sim/vllm-cpu:0.31.0}"
OUT="${GB10_SIM_IMAGES:-$SIM_BUILD/images.yml}"
node="$SIM_PREFIX-$(node_name 1)"

[ "$(docker inspect -f '{{.State.Running}}' "$node" 2>/dev/null)" = true ] \
  || die "node $node is not running: start the simulation with sim/up.sh (SIM_PREFIX=$SIM_PREFIX)"

CACHE_ROOT="${GB10_SIM_REGISTRY_CACHE:-$HOME/.cache/gb10-serving/registry}"
volume="$SIM_PREFIX-registry"
registry_empty() {  # the scenario's registry holds no repository yet
  docker run --rm -v "$volume:/r:ro" --entrypoint sh "$SIM_NODE_IMAGE" -c '[ ! -d /r/docker/registry/v2/repositories ]'
}
cache_key() {  # the Ids of the images this publish pushes, and which it pushes
  local image
  for image in "$STANDIN_IMAGE" "$NEXT_IMAGE" \
      $([ "${SIM_PUBLISH_REAL:-0}" = 1 ] && echo "$REAL_IMAGE") \
      $([ "${SIM_PUBLISH_REAL_PREV:-0}" = 1 ] && echo "$REAL_PREV_IMAGE"); do
    printf '%s %s\n' "$image" "$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null || echo missing)"
  done | sha256sum | cut -c1-16
}
from_cache=0 fill_cache=0 cache=""
if [ "$CACHE_ROOT" != off ] && registry_empty; then
  cache="$CACHE_ROOT/$(cache_key)"
  if [ -f "$cache/digests" ]; then
    docker run --rm -v "$volume:/r" -v "$cache:/c:ro" --entrypoint sh "$SIM_NODE_IMAGE" \
      -c 'mkdir -p /r/docker && cp -a /c/docker/. /r/docker/' \
      || die "copying the registry cache $cache into $volume failed"
    from_cache=1
    say "registry $volume filled from the cache $cache (no image loaded into $node or pushed)" >&2
  else
    fill_cache=1
  fi
fi
cached() { sed -n "s/^$1=//p" "$cache/digests"; }
obtain() {  # obtain NAME COMMAND...: the digest NAME from the cache, else COMMAND's (a publish)
  local name=$1
  shift
  if [ "$from_cache" = 1 ]; then
    cached "$name"
  else
    "$@"
  fi
}

publish() {  # publish IMAGE [REPOSITORY]: pushes IMAGE as REPOSITORY:<its tag> from node 1; prints the repository digest
  local image=$1 repository=${2:-$REPOSITORY} image_id held digest reference
  reference="$repository:${1##*:}"
  image_id=$(docker image inspect -f '{{.Id}}' "$image" 2>/dev/null) \
    || die "$image is missing: build it with sim/standin/build.sh (make sim-images) or sim/vllm_cpu/build.sh (make sim-real-image, make sim-real-image-prev)"
  held=$(docker exec "$node" docker image inspect -f '{{.Id}}' "$reference" 2>/dev/null || true)
  if [ "$held" != "$image_id" ]; then
    say "loading $image into $node's engine" >&2
    docker save "$image" | docker exec -i "$node" docker load -q >/dev/null \
      || die "docker load of $image into $node failed"
    docker exec "$node" docker tag "$image" "$reference"
  fi
  push_and_read_digest "$reference" "$repository" "$image"
}

push_and_read_digest() {  # REFERENCE REPOSITORY WHAT: pushes REFERENCE from node 1; prints its repository digest
  local reference=$1 repository=$2 what=$3 digest
  docker exec "$node" docker push -q "$reference" >/dev/null 2>"$SIM_BUILD/publish.log" \
    || die "push of $reference from $node failed: see $SIM_BUILD/publish.log"
  digest=$(docker exec "$node" docker image inspect -f '{{range .RepoDigests}}{{println .}}{{end}}' "$reference" \
    | sed -n "s#^$repository@##p" | head -n1)
  [[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || die "no repository digest for $reference after the push (got '$digest')"
  say "published $what: $repository@$digest" >&2
  printf '%s' "$digest"
}

digest=$(obtain gb10_sim_standin_digest publish "$STANDIN_IMAGE") || exit 1
next_digest=$(obtain gb10_sim_standin_next_digest publish "$NEXT_IMAGE") || exit 1
[ "$digest" != "$next_digest" ] || die "$NEXT_IMAGE has the digest of $STANDIN_IMAGE ($digest): rebuild it (make sim-images)"

content=$(printf -- '---\n# Written by sim/publish_image.sh: %s and %s as pushed to %s.\ngb10_sim_standin_digest: "%s"\ngb10_sim_standin_next_digest: "%s"\n' \
  "$STANDIN_IMAGE" "$NEXT_IMAGE" "$REPOSITORY" "$digest" "$next_digest")
publish_next_in_node() {  # REPOSITORY TAG: builds TAG-next on TAG in node 1's engine, pushes it; prints its digest
  local repository=$1 tag=$2
  # The node's build cache keeps the same parent and instruction at the same image ID, so a second run pushes the
  # same digest.
  printf 'FROM %s:%s\nLABEL gb10.sim.release="next"\n' "$repository" "$tag" \
    | docker exec -i "$node" docker build -q -t "$repository:$tag-next" - >"$SIM_BUILD/publish-next.log" 2>&1 \
    || { tail -n 20 "$SIM_BUILD/publish-next.log" >&2; die "docker build of $repository:$tag-next in $node failed"; }
  push_and_read_digest "$repository:$tag-next" "$repository" "$repository:$tag-next (its next release)"
}

recorded() { sed -n "s/^$1: \"\(sha256:[0-9a-f]\{64\}\)\"$/\1/p" "$OUT" 2>/dev/null || true; }
if [ "${SIM_PUBLISH_REAL:-0}" = 1 ]; then
  real_digest=$(obtain gb10_sim_real_digest publish "$REAL_IMAGE" "$REAL_REPOSITORY") || exit 1
  real_next_digest=$(obtain gb10_sim_real_next_digest publish_next_in_node "$REAL_REPOSITORY" "${REAL_IMAGE##*:}") \
    || exit 1
else
  real_digest=$(recorded gb10_sim_real_digest) real_next_digest=$(recorded gb10_sim_real_next_digest)
fi
[ -z "$real_digest" ] || content+=$(printf -- '\n# %s as pushed to %s.\ngb10_sim_real_digest: "%s"' \
  "$REAL_IMAGE" "$REAL_REPOSITORY" "$real_digest")
[ -z "$real_next_digest" ] || content+=$(printf -- '\n# Its next release.\ngb10_sim_real_next_digest: "%s"' \
  "$real_next_digest")
if [ "${SIM_PUBLISH_REAL_PREV:-0}" = 1 ]; then
  real_prev_digest=$(obtain gb10_sim_real_prev_digest publish "$REAL_PREV_IMAGE" "$REAL_REPOSITORY") || exit 1
  [ "$real_prev_digest" != "$real_digest" ] || die "$REAL_PREV_IMAGE has the digest of $REAL_IMAGE ($real_digest)"
else
  real_prev_digest=$(recorded gb10_sim_real_prev_digest)
fi
[ -z "$real_prev_digest" ] || content+=$(printf -- '\n# %s as pushed to %s.\ngb10_sim_real_prev_digest: "%s"' \
  "$REAL_PREV_IMAGE" "$REAL_REPOSITORY" "$real_prev_digest")
if [ "$fill_cache" = 1 ]; then
  # Only what this run pushed into an empty registry: the storage holds exactly these images.
  {
    printf 'gb10_sim_standin_digest=%s\ngb10_sim_standin_next_digest=%s\n' "$digest" "$next_digest"
    if [ "${SIM_PUBLISH_REAL:-0}" = 1 ]; then
      printf 'gb10_sim_real_digest=%s\ngb10_sim_real_next_digest=%s\n' "$real_digest" "$real_next_digest"
    fi
    [ "${SIM_PUBLISH_REAL_PREV:-0}" != 1 ] || printf 'gb10_sim_real_prev_digest=%s\n' "$real_prev_digest"
  } >"$SIM_BUILD/registry-digests.$SIM_PREFIX"
  mkdir -p "$CACHE_ROOT"
  staging="$CACHE_ROOT/.tmp.$SIM_PREFIX.$$"
  rm -rf "$staging"
  mkdir -p "$staging"
  if docker run --rm -v "$volume:/r:ro" -v "$staging:/c" --entrypoint cp "$SIM_NODE_IMAGE" -a /r/docker /c/; then
    cp "$SIM_BUILD/registry-digests.$SIM_PREFIX" "$staging/digests"
    # another prefix may have filled the same key meanwhile: the first one stays
    if mv -T "$staging" "$cache" 2>/dev/null; then
      say "registry storage kept in the cache $cache" >&2
    else
      rm -rf "$staging"
    fi
  else
    rm -rf "$staging"
    say "could not keep the registry storage in $cache (the next fresh publish loads and pushes again)" >&2
  fi
  rm -f "$SIM_BUILD/registry-digests.$SIM_PREFIX"
fi
if [ "$(cat "$OUT" 2>/dev/null)" != "$content" ]; then
  mkdir -p "$(dirname "$OUT")"
  printf '%s\n' "$content" >"$OUT.tmp" && mv "$OUT.tmp" "$OUT"
  say "wrote $OUT"
fi
