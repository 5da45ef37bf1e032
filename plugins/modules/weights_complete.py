#!/usr/bin/python
# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Ansible module: is a model snapshot on this node complete?"""

from __future__ import annotations

DOCUMENTATION = r"""
module: weights_complete
short_description: Prove a Hugging Face snapshot on this node complete by content, and remove what is wrong
description:
  - Reads the snapshot folder of a pinned revision in the node's Hugging Face cache and checks that config.json, the
    safetensors index, every shard it names and every other file of the manifest (what the model_weights fetch
    recorded from the hub's tree listing) are present with the hub's size and the hub's content (the sha256 of an
    LFS file, the git blob sha1 of any other), and that the model's cache folder holds no partial download
    (C(*.incomplete)).
  - Snapshot links are followed wherever they resolve, so a cache whose blobs live in huggingface_hub's shared blob
    store (C(hub/blobs/<xx>/<xet hash>), as C(hf download) or vLLM with Xet leave it) is read as it is.
  - Hashing is incremental (O(hash_cache)), a file is hashed again only when its size, mtime or ctime moved.
  - With O(remove_bad=true) and outside check mode, a file of the wrong size or content is removed (its snapshot
    link and the model's blob entry) so that the next fetch or copy gets it again, and so is a partial download
    longer than its file (a resumed request for the rest can never complete it). In check mode it only reports.
  - With O(fail_incomplete=true) an incomplete snapshot fails the task with a message naming the node and the
    missing or wrong files.
version_added: 0.1.0
extends_documentation_fragment:
  - gb10.serving.node
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
    details: In check mode nothing is removed and the hash cache is not written; C(changed) says what would go.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
    details: C(removed) lists the files removed (or that would be).
author:
  - gb10.serving maintainers (!UNKNOWN)
options:
  cache_dir:
    description: The node's Hugging Face cache folder (the one mounted at /root/.cache/huggingface).
    type: path
    required: true
  repo_id:
    description: Model repository id, for example C(org/name).
    type: str
    required: true
  revision:
    description: Commit the snapshot is pinned to.
    type: str
    required: true
  manifest:
    description: JSON file of {path {size, blob, sha256 or git_oid}} the fetch recorded from the hub.
    type: path
    required: true
  hash_cache:
    description:
      - JSON file remembering each blob's size, mtime_ns, ctime_ns and digests (shared with the transfer script).
      - Without it every file is hashed on every run.
    type: path
  remove_bad:
    description: Remove files of the wrong size or content, and over-long partial downloads (not in check mode).
    type: bool
    default: false
  fail_incomplete:
    description: Fail the task when the snapshot is not complete.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Refuse to serve from a snapshot that is not the hub's, byte for byte
  gb10.serving.weights_complete:
    node: "{{ inventory_hostname }}"
    cache_dir: /var/lib/gb10/hf-cache
    repo_id: gb10-sim/tiny-moe
    revision: 5d0c2a8e4b1f7c3a9e6d2b8f0a4c6e1d3b5f7a9c
    manifest: /var/lib/gb10/model-weights/manifests/gb10-sim--tiny-moe@5d0c2a8e4b1f7c3a9e6d2b8f0a4c6e1d3b5f7a9c.json
    hash_cache: /var/lib/gb10/model-weights/hashes.json
    remove_bad: true
    fail_incomplete: true
"""

RETURN = r"""
complete:
  description: Whether the snapshot is complete and every file has the hub's content.
  type: bool
  returned: always
snapshot_path:
  description: The snapshot folder checked.
  type: str
  returned: always
missing:
  description: Files the snapshot lacks (config.json, the index, shards, other manifest files).
  type: list
  elements: str
  returned: always
wrong_size:
  description: Files whose size differs from the hub's, with both sizes.
  type: list
  elements: str
  returned: always
wrong_content:
  description: Files of the hub's size whose sha256 (LFS) or git blob sha1 differs from the hub's.
  type: list
  elements: str
  returned: always
bad:
  description: Files of the wrong size or content, to be fetched again.
  type: list
  elements: str
  returned: always
discard:
  description: Partial downloads longer than their file.
  type: list
  elements: str
  returned: always
removed:
  description: Paths removed (in check mode, that would be removed).
  type: list
  elements: str
  returned: always
partial:
  description: Partial download files found in the model's cache folder.
  type: list
  elements: str
  returned: always
files:
  description: Size of every file the snapshot resolves to, by relative path.
  type: dict
  returned: always
sha256:
  description: sha256 of every file the snapshot resolves to, by relative path.
  type: dict
  returned: always
hashed:
  description: Files hashed in this run (the others came from the hash cache).
  type: list
  elements: str
  returned: always
bytes_present:
  description: Bytes of the snapshot's files present.
  type: int
  returned: always
bytes_expected:
  description: Bytes the manifest lists (0 without one).
  type: int
  returned: always
fingerprint:
  description: sha256 of the sorted {path sha256} listing, equal on nodes with the same content.
  type: str
  returned: always
msg:
  description: One line per problem, naming the node and the files, or a line saying the snapshot is complete.
  type: str
  returned: always
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gb10.serving.plugins.module_utils._weights.hash_cache import (
    cache_key,
    cached_digests,
    dump_hash_cache,
    load_hash_cache,
    remember,
)
from ansible_collections.gb10.serving.plugins.module_utils._weights.hashing import fingerprint, hash_file
from ansible_collections.gb10.serving.plugins.module_utils._weights.manifest import expected_digests, repo_folder
from ansible_collections.gb10.serving.plugins.module_utils._weights.snapshot import (
    INDEX_FILE,
    PARTIAL_SUFFIXES,
    check_snapshot,
    removal_targets,
)


def _read_json(path):
    if not path or not os.path.isfile(path):
        return None
    with open(path) as handle:
        return handle.read()


def observe(cache_dir, repo_id, revision, manifest_path, hash_cache=None):
    """What the node holds: sizes, digests (through the hash cache), partial files, where each file resolves."""
    folder = os.path.join(cache_dir, "hub", repo_folder(repo_id))
    snapshot = os.path.join(folder, "snapshots", revision)
    manifest_text = _read_json(manifest_path)
    manifest = json.loads(manifest_text) if manifest_text is not None else None
    root = os.path.realpath(cache_dir)
    cache = dict(hash_cache or {})
    observed, resolved, hashed = None, {}, []
    if os.path.isdir(snapshot):
        observed = {}
        for top, _dirs, names in os.walk(snapshot):
            for name in names:
                path = os.path.join(top, name)
                if not os.path.exists(path):  # a dangling link to a missing blob counts as missing
                    continue
                rel = os.path.relpath(path, snapshot)
                stat = os.stat(path)
                resolved[rel] = os.path.realpath(path)
                observed[rel] = {"size": stat.st_size}
                entry = (manifest or {}).get(rel)
                if entry is not None and stat.st_size != entry["size"]:
                    continue  # the size already tells: no need to read it
                want_git = "git_sha1" in expected_digests(entry or {})
                key = cache_key(root, resolved[rel])
                digests = cached_digests(cache, key, stat, want_git)
                if digests is None:
                    digests = hash_file(path, stat.st_size, git=want_git)
                    remember(cache, key, stat, digests)  # as it was before the read: a change meanwhile shows
                    hashed.append(rel)
                observed[rel].update(digests)
    partial = {}
    for top, _dirs, names in os.walk(folder):
        for name in names:
            if name.endswith(PARTIAL_SUFFIXES):
                try:
                    partial[os.path.join(top, name)] = os.lstat(os.path.join(top, name)).st_size
                except OSError:  # renamed to its blob between two looks
                    continue
    index_text = _read_json(os.path.join(snapshot, INDEX_FILE))
    return {
        "folder": folder,
        "snapshot": snapshot,
        "observed": observed,
        "index_text": index_text,
        "manifest": manifest,
        "partial": partial,
        "resolved": resolved,
        "hash_cache": cache,
        "hashed": sorted(hashed),
    }


def _unlink(path):
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


def _save_cache(path, root, cache):
    # Entries of files gone (a removed blob, another model deleted) would only grow the file.
    cache = {key: value for key, value in cache.items() if os.path.exists(os.path.join(root, key))}
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        handle.write(dump_hash_cache(cache))
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def main():
    module = AnsibleModule(
        argument_spec={
            "node": {"type": "str", "required": True},
            "cache_dir": {"type": "path", "required": True},
            "repo_id": {"type": "str", "required": True},
            "revision": {"type": "str", "required": True},
            "manifest": {"type": "path", "required": True},
            "hash_cache": {"type": "path"},
            "remove_bad": {"type": "bool", "default": False},
            "fail_incomplete": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    p = module.params
    cache_text = _read_json(p["hash_cache"])
    seen = observe(
        p["cache_dir"],
        p["repo_id"],
        p["revision"],
        p["manifest"],
        load_hash_cache(cache_text) if cache_text else {},
    )
    removing = p["remove_bad"] and not module.check_mode
    result = check_snapshot(
        p["node"],
        seen["snapshot"],
        seen["observed"],
        seen["index_text"],
        seen["manifest"],
        seen["partial"],
        removed=removing,
    )
    result.pop("problems")
    if p["remove_bad"]:
        for line in result.pop("repairs"):  # shown on every run, not only with -v: which node, which file
            module.warn(line)
    else:
        result.pop("repairs")
    targets = []
    if p["remove_bad"]:
        targets = (
            removal_targets(seen["folder"], seen["snapshot"], result["bad"], seen["manifest"], seen["resolved"])
            + result["discard"]
        )
    removed = [path for path in targets if removing and _unlink(path)] if removing else targets
    if p["hash_cache"] and not module.check_mode and os.path.isdir(os.path.dirname(p["hash_cache"])):
        _save_cache(p["hash_cache"], os.path.realpath(p["cache_dir"]), seen["hash_cache"])
    observed = seen["observed"] or {}
    result.update(
        changed=bool(removed),
        snapshot_path=seen["snapshot"],
        removed=removed,
        files={path: item["size"] for path, item in observed.items()},
        sha256={path: item["sha256"] for path, item in observed.items() if "sha256" in item},
        hashed=seen["hashed"],
        bytes_present=sum(item["size"] for item in observed.values()),
        bytes_expected=sum(e["size"] for e in (seen["manifest"] or {}).values()),
        fingerprint=fingerprint({path: item for path, item in observed.items() if "sha256" in item}),
    )
    if p["fail_incomplete"] and not result["complete"]:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
