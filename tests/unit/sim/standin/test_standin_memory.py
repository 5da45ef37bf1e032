"""The stand-in's KV cache: sized like vLLM 0.32 from the fake GPU, refused with vLLM's words, grows with context."""

import pytest
from vllm._standin import memory as mem
from vllm._standin import recall

TINY_MOE = {  # sim/model/tiny_moe.py's config.json
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 64,
    "num_local_experts": 8,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 8192,
}
WEIGHTS = 102_781_344
SIM = {"GB10_STANDIN_MEMORY_SCALE": "128"}


def size(max_model_len, util=0.45, env=None, **kw):
    return mem.size_kv_cache(
        gpu=mem.fake_gpu(SIM if env is None else env),
        gpu_memory_utilization=util,
        weights_bytes=WEIGHTS,
        max_model_len=max_model_len,
        per_token=mem.kv_bytes_per_token(TINY_MOE),
        max_num_seqs=kw.pop("max_num_seqs", 4),
        **kw,
    )


def test_fake_gpu_is_a_gb10_unless_scaled():
    gpu = mem.fake_gpu({})
    assert gpu["total_bytes"] == 124608 * mem.MIB
    assert gpu["capability"] == (12, 1)
    assert mem.fake_gpu(SIM)["total_bytes"] == 124608 * mem.MIB // 128


def test_kv_bytes_per_token_from_config():
    assert mem.kv_bytes_per_token(TINY_MOE) == 2 * 4 * 2 * 64 * 2
    assert mem.kv_bytes_per_token(TINY_MOE, "fp8") == 2 * 4 * 2 * 64
    assert mem.kv_bytes_per_token(TINY_MOE, tensor_parallel_size=2) == 2 * 4 * 1 * 64 * 2
    assert mem.kv_bytes_per_token({"architectures": ["TinyMoe"]}) is None


def test_kv_cache_is_what_the_share_leaves_after_weights_and_activations():
    kv = size(8192)
    requested = int(0.45 * 124608 * mem.MIB / 128)
    assert kv["requested"] == requested
    assert kv["available"] == requested - WEIGHTS - 1024 * mem.MIB // 128
    assert kv["tokens"] == (kv["available"] // (16 * 2048) - 1) * 16
    assert 150_000 < kv["tokens"] < 200_000
    print(f"\nspark-1 share 0.45, scale 128: {kv['tokens']} KV tokens, {kv['concurrency']:.2f}x at 8192")


def test_resident_memory_grows_with_the_context_it_starts_with():
    resident = [size(n)["resident"] for n in (2048, 8192, 32768)]
    assert resident == sorted(resident) and resident[0] < resident[-1]
    assert resident[1] == 4 * 8192 * 2048
    assert size(131072)["resident"] == 256 * mem.MIB  # the simulation's cap
    assert size(8192, max_num_seqs=12)["resident"] == 3 * resident[1]


def test_refuses_a_context_the_kv_cache_cannot_hold_with_vllms_words():
    with pytest.raises(mem.KVCacheError) as info:
        size(262144)
    text = str(info.value)
    assert text.startswith("To serve at least one request with the model's max seq len (262144), (0.5 GiB KV cache")
    assert "which is larger than the available KV cache memory (0.32 GiB)" in text
    assert "the estimated maximum model length is 169984" in text
    assert "decreasing `max_model_len` when initializing the engine" in text


def test_the_estimate_is_the_longest_context_that_starts():
    with pytest.raises(mem.KVCacheError) as info:
        size(262144)
    estimated = int(str(info.value).split("estimated maximum model length is ")[1].split(".")[0])
    assert size(estimated)["tokens"] >= estimated
    with pytest.raises(mem.KVCacheError):
        size(estimated + 16)


def test_no_memory_left_for_the_cache():
    with pytest.raises(mem.KVCacheError, match=r"^No available memory for the cache blocks\. Try increasing"):
        size(8192, util=0.1)


def test_kv_cache_memory_bytes_replaces_the_share():
    kv = size(8192, kv_cache_memory_bytes=64 * mem.MIB)
    assert kv["available"] == 64 * mem.MIB
    with pytest.raises(mem.KVCacheError):
        size(65536, kv_cache_memory_bytes=64 * mem.MIB)


def test_touch_makes_the_pages_resident():
    buffer = mem.touch(3 * mem.PAGE + 1)
    assert len(buffer) == 3 * mem.PAGE + 1
    assert buffer[0] == buffer[mem.PAGE] == buffer[3 * mem.PAGE] == 1


def test_kv_log_lines_are_vllms():
    lines = dict(mem.log_lines(size(8192), 8192))
    assert lines["gpu_worker.py:760"].startswith("Available KV cache memory: 0.32 GiB")
    assert lines["kv_cache_utils.py:2328"].startswith("GPU KV cache size: 169,984 tokens, Maximum concurrency")


def test_recall_finds_the_needle_anywhere_in_a_long_prompt():
    from ansible_collections.gb10.serving.plugins.module_utils._ladder import recall_prompt

    prompt = recall_prompt(65536, "7291-65536")
    assert recall.answer([{"role": "user", "content": prompt}]) == "7291-65536"
    assert recall.answer([{"role": "user", "content": "hello"}]) is None
    assert recall.answer([{"role": "user", "content": "What is the capital?"}]) is None
