"""vLLM stand-in of the gb10.serving simulation: the `vllm serve` face of vLLM 0.32.0 without a GPU.

Only the engine is replaced; argv strictness, model checks, Ray joining, HTTP API and metric names follow the real
release. See sim/standin/README.md.
"""

__version__ = "0.32.0"
