# Copyright: gb10.serving maintainers
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Model weights on a node: what a complete snapshot is, proven by content.

A snapshot is complete when config.json, the safetensors index, every shard it names and every other file of the
manifest (what the fetch recorded from the hub's tree listing) are there with the hub's size AND the hub's content:
the sha256 of an LFS file (``lfs.oid`` in the tree, the name huggingface_hub gives its blob), the git blob sha1 of
any other file (``oid``). The model's cache folder must hold no partial download (``*.incomplete``).

Hashing 181 GiB takes minutes, so it is incremental: a JSON cache keyed by the blob's path under the Hugging Face
cache root remembers size, mtime_ns, ctime_ns and the digests, and a file is hashed again only when one of them
moved (a write that restores the mtime still moves ctime). The module ``weights_complete`` and the transfer script
of the model_weights role share that cache, so a blob the fetch or the copy has just hashed is not hashed again.

One concern a file; callers import the file they need:

- ``manifest.py``: the hub's tree listing as the manifest the fetch records, and what each entry promises;
- ``hashing.py``: the sha256 and git blob sha1 of a file or of bytes as they pass, a fingerprint of a listing;
- ``hash_cache.py``: the incremental hash cache (a digest stands while size, mtime_ns and ctime_ns stand);
- ``snapshot.py``: is one node's snapshot complete, and what to remove so that the next fetch gets a bad file again;
- ``disk.py``: does the rest of the weights fit on the cache's disk, with the reserve;
- ``progress.py``: one round of the progress loop, from the status file the transfer script writes;
- ``revisions.py``: which cached revisions are superseded, and which ones a running container has mounted.

That script runs in the serving image, where the collection is not installed: the roles copy this whole package next
to it (roles/model_weights/tasks/configure.yml, roles/flashinfer_jit/tasks/install.yml) and it imports it from there
as ``_weights``. So these files import the standard library only, and each other by relative imports.
"""
