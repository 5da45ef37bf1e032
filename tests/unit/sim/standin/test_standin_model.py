# Copyright: gb10.serving maintainers
# Apache-2.0
"""The model argument must be a local snapshot; every shard is read in full (safetensors header parsed)."""

from __future__ import annotations

import hashlib
import json
import re
import struct

import pytest
from vllm._standin import model as mdl

SHARD_LINE = re.compile(
    r"^Loading safetensors checkpoint shards: +\d+% Completed \| \d+/\d+ \[\d\d:\d\d<(\d\d:\d\d|\?), "
)


def write_shard(path, size):
    data = bytes(range(256)) * (size // 256)
    header = json.dumps(
        {"__metadata__": {"format": "pt"}, "w": {"dtype": "U8", "shape": [len(data)], "data_offsets": [0, len(data)]}}
    )
    path.write_bytes(struct.pack("<Q", len(header)) + header.encode() + data)
    return 8 + len(header) + len(data)


@pytest.fixture
def snapshot(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    sizes = [write_shard(tmp_path / n, 4096 * (i + 1)) for i, n in enumerate(names)]
    index = {"metadata": {}, "weight_map": {"a": names[0], "b": names[1], "c": names[1]}}
    (tmp_path / mdl.INDEX).write_text(json.dumps(index))
    return tmp_path, names, sum(sizes)


def test_pitfall_repo_id_as_model_path():
    # Seed 004 pitfall 5: a repo id is not a model path; the failure is a FileNotFoundError naming the path.
    with pytest.raises(mdl.ModelError) as caught:
        mdl.shard_names("zai-org/GLM-5.3-Flash")
    assert caught.value.kind == "FileNotFoundError"
    assert "zai-org/GLM-5.3-Flash/processor_config.json" in str(caught.value)


def test_directory_without_config_or_shards_is_refused(tmp_path):
    with pytest.raises(mdl.ModelError, match=r"no config\.json"):
        mdl.shard_names(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(mdl.ModelError, match="Cannot find any model weights with"):
        mdl.shard_names(str(tmp_path))


def test_index_names_every_shard_and_all_bytes_are_read(snapshot):
    path, names, total = snapshot
    lines = []
    read, _load_s = mdl.load(str(path), lines.append)
    assert read == total
    assert mdl.shard_names(str(path)) == names
    assert len(lines) == 3
    assert all(SHARD_LINE.match(line) for line in lines), lines
    assert "100% Completed | 2/2" in lines[-1]


def test_shard_missing_from_the_index_is_refused(snapshot):
    path, names, _total = snapshot
    (path / names[1]).unlink()
    with pytest.raises(mdl.ModelError, match=f"missing: {names[1]}"):
        mdl.shard_names(str(path))


def test_truncated_or_foreign_shard_is_refused(snapshot):
    path, names, _total = snapshot
    shard = path / names[0]
    shard.write_bytes(shard.read_bytes()[:-10])
    with pytest.raises(mdl.ModelError, match="incomplete shard"):
        mdl.read_shard(str(shard))
    shard.write_bytes(b"\xff" * 16)
    with pytest.raises(mdl.ModelError, match="header length"):
        mdl.read_shard(str(shard))


def test_progress_line_matches_the_real_log_shape():
    real = "Loading safetensors checkpoint shards:  56% Completed | 5/9 [00:13<00:11,  2.87s/it]"
    ours = mdl.format_progress(5, 9, 13.0)
    assert SHARD_LINE.match(real)
    assert SHARD_LINE.match(ours)
    assert ours.startswith("Loading safetensors checkpoint shards:  55% Completed | 5/9 [00:13<00:10,")


def test_load_fingerprints_every_weight_byte(snapshot):
    path, names, _total = snapshot
    first, again = hashlib.sha256(), hashlib.sha256()
    mdl.load(str(path), lambda _line: None, first)
    mdl.load(str(path), lambda _line: None, again)
    assert first.hexdigest() == again.hexdigest()
    shard = path / names[1]
    data = bytearray(shard.read_bytes())
    data[-1] ^= 0x01
    shard.write_bytes(bytes(data))
    changed = hashlib.sha256()
    mdl.load(str(path), lambda _line: None, changed)
    assert changed.hexdigest() != first.hexdigest()
