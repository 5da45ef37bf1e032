"""The simulation's model repository `gb10-sim/tiny-moe`, generated deterministically in memory.

Two revisions, each a mapping of path -> bytes, declared by commit sha (the hub maps commits to content, as the
real hub does). The first revision is the one the sim profiles pin. Shards are real safetensors files whose
tensors match config.json, each about 24 MiB: larger than huggingface_hub's 10 MiB read chunk, so a transfer
cut off inside a shard exercises a ranged resume. Standard library only (the hub container has nothing else).
"""

from __future__ import annotations

import hashlib
import json
import random
import struct

REPO_ID = "gb10-sim/tiny-moe"
REVISION_1 = "5d0c2a8e4b1f7c3a9e6d2b8f0a4c6e1d3b5f7a9c"  # pinned by inventories/sim serving_profiles
REVISION_2 = "9b1e4f7a2c6d8e0f3a5b7c9d1e2f4a6b8c0d2e4f"  # a later commit; `main` points here
REFS = {"main": REVISION_2}
NUM_LAYERS = 4
HIDDEN = 256
EXPERTS = 8
EXPERT_DIM = 1024
VOCAB = 1024
LFS_SUFFIXES = (".safetensors",)

# High bytes of bfloat16 values between about -0.06 and 0.06 (sign, small exponents): no NaN or Inf anywhere.
_BF16_HIGH = bytes((0x3C, 0x3D, 0xBC, 0xBD)[i % 4] for i in range(256))


def _bf16(rng: random.Random, count: int) -> bytes:
    data = bytearray(rng.randbytes(count * 2))
    data[1::2] = bytes(data[1::2]).translate(_BF16_HIGH)
    return bytes(data)


def safetensors(tensors: list[tuple[str, list[int], bytes]]) -> bytes:
    """A safetensors file: u64 little-endian header length, JSON header (8-byte aligned), then the raw data."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, shape, data in tensors:
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    return struct.pack("<Q", len(raw)) + raw + b"".join(data for _name, _shape, data in tensors)


def _shard_tensors(layer: int, seed: str) -> list[tuple[str, list[int], bytes]]:
    rng = random.Random(f"{seed}/layer{layer}")
    prefix = f"model.layers.{layer}"
    tensors = [
        (f"{prefix}.input_layernorm.weight", [HIDDEN], _bf16(rng, HIDDEN)),
        (
            f"{prefix}.mlp.experts.down_proj",
            [EXPERTS, 2 * HIDDEN, EXPERT_DIM],
            _bf16(rng, EXPERTS * 2 * HIDDEN * EXPERT_DIM),
        ),
        (
            f"{prefix}.mlp.experts.gate_up_proj",
            [EXPERTS, 2 * EXPERT_DIM, 2 * HIDDEN],
            _bf16(rng, EXPERTS * 2 * EXPERT_DIM * 2 * HIDDEN),
        ),
        (f"{prefix}.mlp.gate.weight", [EXPERTS, HIDDEN], _bf16(rng, EXPERTS * HIDDEN)),
        (f"{prefix}.self_attn.qkv_proj.weight", [HIDDEN + 2 * 2 * 64, HIDDEN], _bf16(rng, (HIDDEN + 256) * HIDDEN)),
    ]
    if layer == 0:
        tensors.insert(0, ("model.embed_tokens.weight", [VOCAB, HIDDEN], _bf16(rng, VOCAB * HIDDEN)))
    if layer == NUM_LAYERS - 1:
        tensors.append(("lm_head.weight", [VOCAB, HIDDEN], _bf16(rng, VOCAB * HIDDEN)))
    return tensors


def _config(revision_note: str) -> dict:
    return {
        "architectures": ["MixtralForCausalLM"],
        "model_type": "mixtral",
        "hidden_size": HIDDEN,
        "intermediate_size": EXPERT_DIM,
        "num_hidden_layers": NUM_LAYERS,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "num_local_experts": EXPERTS,
        "num_experts_per_tok": 2,
        "vocab_size": VOCAB,
        "max_position_embeddings": 8192,
        "torch_dtype": "bfloat16",
        "gb10_sim_revision_note": revision_note,
    }


def _tokenizer() -> dict[str, bytes]:
    vocab = {f"<t{i}>": i for i in range(VOCAB - 3)}
    vocab.update({"<s>": VOCAB - 3, "</s>": VOCAB - 2, "<pad>": VOCAB - 1})
    tokenizer = {"version": "1.0", "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "<pad>"}}
    config = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "model_max_length": 8192}
    return {
        "tokenizer.json": json.dumps(tokenizer, sort_keys=True).encode(),
        "tokenizer_config.json": json.dumps(config, sort_keys=True, indent=2).encode(),
        "special_tokens_map.json": json.dumps({"bos_token": "<s>", "eos_token": "</s>"}, indent=2).encode(),
    }


def build_revision(seed_of_last_shard: str, note: str) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    weight_map, total = {}, 0
    for layer in range(NUM_LAYERS):
        name = f"model-{layer + 1:05d}-of-{NUM_LAYERS:05d}.safetensors"
        seed = seed_of_last_shard if layer == NUM_LAYERS - 1 else "tiny-moe"
        tensors = _shard_tensors(layer, seed)
        files[name] = safetensors(tensors)
        for tensor_name, _shape, data in tensors:
            weight_map[tensor_name] = name
            total += len(data)
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    files["model.safetensors.index.json"] = json.dumps(index, indent=2).encode()
    files["config.json"] = json.dumps(_config(note), indent=2, sort_keys=True).encode()
    files["generation_config.json"] = json.dumps({"bos_token_id": VOCAB - 3, "eos_token_id": VOCAB - 2}).encode()
    files.update(_tokenizer())
    files[".gitattributes"] = b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"
    files["README.md"] = f"# tiny-moe\n\nA generated model for the gb10.serving simulation ({note}).\n".encode()
    return dict(sorted(files.items()))


def repository() -> dict[str, dict[str, bytes]]:
    """{commit sha: {path: bytes}} for every revision of the repository."""
    return {
        REVISION_1: build_revision("tiny-moe", "revision 1"),
        REVISION_2: build_revision("tiny-moe-r2", "revision 2"),
    }


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(data: bytes) -> bytes:
    digest = hashlib.sha256(data).hexdigest()
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{digest}\nsize {len(data)}\n".encode()


def is_lfs(path: str) -> bool:
    return path.endswith(LFS_SUFFIXES)


if __name__ == "__main__":
    for commit, files in repository().items():
        size = sum(len(v) for v in files.values())
        weights = sum(len(v) for k, v in files.items() if k.endswith(".safetensors"))
        print(f"{commit}: {len(files)} files, {size} bytes, safetensors {weights} bytes = {weights / 2**30:.4f} GiB")
        for path, data in files.items():
            print(f"  {len(data):>10}  {path}")
