"""The stand-in engine's settings for a small served model, as the tests start it."""

from __future__ import annotations


def engine_config(**over):
    """What `vllm serve` passes the engine for tiny-moe at /snap (two sequences, hermes tool calls), and ``over``."""
    return {
        "model": "/snap",
        "served_model_name": ["tiny-moe"],
        "max_num_seqs": 2,
        "max_model_len": 8192,
        "enable_auto_tool_choice": True,
        "tool_call_parser": "hermes",
        **over,
    }
