"""A model's Hugging Face cache as huggingface_hub leaves it, for the tests of the weights' content proof."""

from __future__ import annotations

import hashlib
import os


def lay_out(hub, repo_id, revision, files, manifest, shared=()):
    """``hub``/models--<org>--<name>: ``blobs/<blob>`` per file of ``files`` ({path: bytes}) and the snapshot's
    relative links to them, as huggingface_hub writes them; returns the model's folder.

    The paths in ``shared`` have their blob in the cache-wide store instead (``hub/blobs/<xx>/<hash>``, the model's
    blob a link into it), as Xet downloads leave them: the store names a file by another hash than its content's
    sha256, so its name proves nothing about its content.
    """
    folder = hub / ("models--" + repo_id.replace("/", "--"))
    snapshot = folder / "snapshots" / revision
    (folder / "blobs").mkdir(parents=True, exist_ok=True)
    for path, data in files.items():
        blob = manifest[path]["blob"]
        if path in shared:
            xet = hashlib.sha256(b"xet merkle root of " + data).hexdigest()
            store = hub / "blobs" / xet[:2]
            store.mkdir(parents=True, exist_ok=True)
            (store / xet).write_bytes(data)
            os.symlink(f"../../blobs/{xet[:2]}/{xet}", folder / "blobs" / blob)
        else:
            (folder / "blobs" / blob).write_bytes(data)
        link = snapshot / path
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(folder / "blobs" / blob, link.parent), link)
    return folder
