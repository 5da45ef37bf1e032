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

import byte_bpe

REPO_ID = "gb10-sim/tiny-moe"
REVISION_1 = "5d0c2a8e4b1f7c3a9e6d2b8f0a4c6e1d3b5f7a9c"  # pinned by inventories/sim serving_profiles
REVISION_2 = "9b1e4f7a2c6d8e0f3a5b7c9d1e2f4a6b8c0d2e4f"  # a later commit; `main` points here
REFS = {"main": REVISION_2}
NUM_LAYERS = 4
HIDDEN = 256
HEADS = 4
KV_HEADS = 2
HEAD_DIM = 64
EXPERTS = 8
EXPERT_DIM = 2048
VOCAB = 1024
MAX_POSITIONS = 8192
LFS_SUFFIXES = (".safetensors",)

# High bytes of bfloat16 values between about -0.06 and 0.06 (sign, small exponents): no NaN or Inf anywhere.
_BF16_HIGH = bytes((0x3C, 0x3D, 0xBC, 0xBD)[i % 4] for i in range(256))
_BF16_ONE = b"\x80\x3f"  # 1.0: the norms' scale, so the residual stream keeps its size


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
    """One decoder layer under the names transformers' MixtralForCausalLM saves (and vLLM's Mixtral loads):
    q/k/v/o projections, the router as block_sparse_moe.gate and each expert's w1 (gate), w2 (down), w3 (up)."""
    rng = random.Random(f"{seed}/layer{layer}")
    prefix = f"model.layers.{layer}"
    attention = HEADS * HEAD_DIM
    kv = KV_HEADS * HEAD_DIM
    tensors = [
        (f"{prefix}.input_layernorm.weight", [HIDDEN], _BF16_ONE * HIDDEN),
        (f"{prefix}.post_attention_layernorm.weight", [HIDDEN], _BF16_ONE * HIDDEN),
        (f"{prefix}.self_attn.q_proj.weight", [attention, HIDDEN], _bf16(rng, attention * HIDDEN)),
        (f"{prefix}.self_attn.k_proj.weight", [kv, HIDDEN], _bf16(rng, kv * HIDDEN)),
        (f"{prefix}.self_attn.v_proj.weight", [kv, HIDDEN], _bf16(rng, kv * HIDDEN)),
        (f"{prefix}.self_attn.o_proj.weight", [HIDDEN, attention], _bf16(rng, HIDDEN * attention)),
        (f"{prefix}.block_sparse_moe.gate.weight", [EXPERTS, HIDDEN], _bf16(rng, EXPERTS * HIDDEN)),
    ]
    for expert in range(EXPERTS):
        at = f"{prefix}.block_sparse_moe.experts.{expert}"
        tensors += [
            (f"{at}.w1.weight", [EXPERT_DIM, HIDDEN], _bf16(rng, EXPERT_DIM * HIDDEN)),
            (f"{at}.w2.weight", [HIDDEN, EXPERT_DIM], _bf16(rng, HIDDEN * EXPERT_DIM)),
            (f"{at}.w3.weight", [EXPERT_DIM, HIDDEN], _bf16(rng, EXPERT_DIM * HIDDEN)),
        ]
    if layer == 0:
        tensors.insert(0, ("model.embed_tokens.weight", [VOCAB, HIDDEN], _bf16(rng, VOCAB * HIDDEN)))
    if layer == NUM_LAYERS - 1:
        tensors.append(("model.norm.weight", [HIDDEN], _BF16_ONE * HIDDEN))
        tensors.append(("lm_head.weight", [VOCAB, HIDDEN], _bf16(rng, VOCAB * HIDDEN)))
    return tensors


def _config(revision_note: str) -> dict:
    return {
        "architectures": ["MixtralForCausalLM"],
        "model_type": "mixtral",
        "hidden_size": HIDDEN,
        "intermediate_size": EXPERT_DIM,
        "num_hidden_layers": NUM_LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": KV_HEADS,
        "head_dim": HEAD_DIM,
        "num_local_experts": EXPERTS,
        "num_experts_per_tok": 2,
        "vocab_size": VOCAB,
        "max_position_embeddings": MAX_POSITIONS,
        "rms_norm_eps": 1e-5,
        "rope_theta": 1000000.0,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "eos_token_id": _SPECIAL_IDS["<|im_end|>"],
        "torch_dtype": "bfloat16",
        "gb10_sim_revision_note": revision_note,
    }


SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
]
_TOKENIZER = byte_bpe.tokenizer_json(VOCAB, SPECIAL_TOKENS)
_SPECIAL_IDS = {token["content"]: token["id"] for token in _TOKENIZER["added_tokens"]}
# ChatML turns with Hermes tool calls: the tools in the system turn, each call as JSON between <tool_call> and
# </tool_call>, what vLLM's hermes parser (--tool-call-parser hermes, the sim profiles') reads back.
CHAT_TEMPLATE = (
    # transformers renders it with trim_blocks: a newline right after a tag is dropped, so each one is written as
    # {{ NL }} there (tests/unit/sim/test_sim_model.py renders it the same way)
    "{% set NL = '\\n' %}"
    "{% if tools %}<|im_start|>system{{ NL }}"
    "{% if messages and messages[0].role == 'system' %}{{ messages[0].content }}{{ NL }}{{ NL }}{% endif %}"
    "You may call one or more functions. The functions are in <tools></tools>:\n<tools>"
    "{% for tool in tools %}{{ NL }}{{ tool | tojson }}{% endfor %}{{ NL }}</tools>\n"
    "For each call, return a JSON object with the function name and arguments within <tool_call></tool_call>:\n"
    '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n'
    "{% elif messages and messages[0].role == 'system' %}"
    "<|im_start|>system{{ NL }}{{ messages[0].content }}<|im_end|>{{ NL }}"
    "{% endif %}"
    "{% for message in messages %}"
    "{% if message.role == 'system' %}"
    "{% elif message.role == 'assistant' and message.tool_calls %}<|im_start|>assistant{{ NL }}"
    "{% if message.content %}{{ message.content }}{{ NL }}{% endif %}"
    "{% for call in message.tool_calls %}<tool_call>{{ NL }}"
    '{"name": "{{ call.function.name }}", "arguments": '
    "{{ call.function.arguments if call.function.arguments is string else call.function.arguments | tojson }}"
    "}{{ NL }}</tool_call>{% endfor %}<|im_end|>{{ NL }}"
    "{% elif message.role == 'tool' %}<|im_start|>user{{ NL }}<tool_response>{{ NL }}{{ message.content }}{{ NL }}"
    "</tool_response><|im_end|>{{ NL }}"
    "{% else %}<|im_start|>{{ message.role }}{{ NL }}{{ message.content }}<|im_end|>{{ NL }}"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant{{ NL }}{% endif %}"
)


def _tokenizer() -> dict[str, bytes]:
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "model_max_length": MAX_POSITIONS,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
        "added_tokens_decoder": {
            str(token["id"]): {k: v for k, v in token.items() if k != "id"} for token in _TOKENIZER["added_tokens"]
        },
    }
    specials = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    return {
        "tokenizer.json": json.dumps(_TOKENIZER, ensure_ascii=False, sort_keys=True).encode(),
        "tokenizer_config.json": json.dumps(config, sort_keys=True, indent=2).encode(),
        "special_tokens_map.json": json.dumps(specials, indent=2).encode(),
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
    files["generation_config.json"] = json.dumps({"eos_token_id": _SPECIAL_IDS["<|im_end|>"]}).encode()
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
