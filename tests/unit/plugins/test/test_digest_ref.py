from ansible_collections.gb10.serving.plugins.test.digest_ref import digest_ref

DIGEST = "sha256:" + "0123456789abcdef" * 4


def test_digest_ref_accepts_only_repository_at_digest():
    assert digest_ref(f"registry:5000/gb10/vllm-standin@{DIGEST}")
    assert digest_ref(f"nvcr.io/nvidia/vllm@{DIGEST}")


def test_pitfall_tag_is_not_a_digest_ref():
    # seed 004: a moving tag served another build after a pull; a tag beside the digest is refused too.
    assert not digest_ref("nvcr.io/nvidia/vllm:25.11-py3")
    assert not digest_ref(f"nvcr.io/nvidia/vllm:25.11-py3@{DIGEST}")
    assert not digest_ref(f"vllm@{DIGEST.upper()}")
    assert not digest_ref(f"vllm@{DIGEST[:-1]}")
    assert not digest_ref("")
    assert not digest_ref(None)
