"""The model argument: a local snapshot directory with config.json and safetensors shards, read in full.

A repository id is refused the way seed 004 pitfall 5 saw it: a FileNotFoundError naming the path, well into
startup. Every shard named by ``model.safetensors.index.json`` (or every ``*.safetensors`` without an index) is
opened, its header parsed (8-byte little-endian length, then JSON) and all its bytes read, so startup time grows
with the checkpoint as on the real engine.
"""

from __future__ import annotations

import json
import os
import struct
import time

INDEX = "model.safetensors.index.json"
CHUNK = 8 * 1024 * 1024


class ModelError(Exception):
    """The model argument cannot be served; ``kind`` is the Python exception vLLM would raise."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind

    def __str__(self):
        return f"{self.kind}: {self.args[0]}"


def shard_names(path):
    """Shard file names of the snapshot at ``path`` (checked: a directory with config.json and shards)."""
    if not os.path.isdir(path):
        raise ModelError(
            "FileNotFoundError",
            f"[Errno 2] No such file or directory: {os.path.join(path, 'processor_config.json')!r} "
            f"(the model argument {path!r} is not a local directory; pass the snapshot path, not a repo id)",
        )
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise ModelError("ValueError", f"Invalid repository ID or local directory specified: {path!r}: no config.json")
    index = os.path.join(path, INDEX)
    if os.path.isfile(index):
        with open(index, encoding="utf-8") as handle:
            weight_map = json.load(handle).get("weight_map") or {}
        names = sorted(set(weight_map.values()))
    else:
        names = sorted(n for n in os.listdir(path) if n.endswith(".safetensors"))
    if not names:
        raise ModelError("RuntimeError", f"Cannot find any model weights with {path!r}")
    missing = [n for n in names if not os.path.isfile(os.path.join(path, n))]
    if missing:
        raise ModelError("RuntimeError", f"Cannot find any model weights with {path!r} (missing: {', '.join(missing)})")
    return names


def read_shard(path, digest=None):
    """Parse the safetensors header of ``path`` and read every byte; return (tensor count, bytes read).

    ``digest`` (a hashlib object), where given, is fed every byte read: the weights' fingerprint the greedy
    answers follow (engine.answer_words)."""
    size = os.path.getsize(path)
    with open(path, "rb") as handle:
        head = handle.read(8)
        if len(head) != 8:
            raise ModelError("RuntimeError", f"{path}: not a safetensors file (shorter than its header length)")
        (length,) = struct.unpack("<Q", head)
        if length > size - 8:
            raise ModelError("RuntimeError", f"{path}: header length {length} exceeds the file size {size}")
        try:
            header = json.loads(handle.read(length))
        except ValueError as exc:
            raise ModelError("RuntimeError", f"{path}: safetensors header is not JSON: {exc}") from exc
        tensors = {k: v for k, v in header.items() if k != "__metadata__"}
        end = max((v["data_offsets"][1] for v in tensors.values()), default=0)
        if 8 + length + end != size:
            raise ModelError(
                "RuntimeError", f"{path}: incomplete shard ({size} bytes, header describes {8 + length + end})"
            )
        read = 8 + length
        if digest is not None:
            digest.update(head)
            digest.update(json.dumps(header, sort_keys=True).encode())
        while True:
            chunk = handle.read(CHUNK)
            if not chunk:
                break
            read += len(chunk)
            if digest is not None:
                digest.update(chunk)
    return len(tensors), read


def format_progress(done, total, elapsed):
    """One line shaped like vLLM's tqdm bar for shard loading."""
    percent = int(100 * done / total) if total else 100
    rate = f"{elapsed / done:.2f}s/it" if done else "?it/s"
    left = (elapsed / done) * (total - done) if done else 0

    def clock(seconds):
        seconds = int(seconds)
        return f"{seconds // 60:02d}:{seconds % 60:02d}"

    return (
        f"Loading safetensors checkpoint shards: {percent:3d}% Completed | {done}/{total} "
        f"[{clock(elapsed)}<{clock(left) if done else '?'}, {rate}]"
    )


def load(path, log, digest=None):
    """Read every shard of the snapshot at ``path``; log progress as vLLM does; return the bytes read.

    ``digest``, where given, is fed every shard's bytes in name order (read_shard)."""
    names = shard_names(path)
    started = time.monotonic()
    total_bytes = 0
    log(format_progress(0, len(names), 0.0))
    for done, name in enumerate(names, start=1):
        _tensors, read = read_shard(os.path.join(path, name), digest)
        total_bytes += read
        log(format_progress(done, len(names), time.monotonic() - started))
    return total_bytes, time.monotonic() - started
