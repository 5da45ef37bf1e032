"""FlashInfer stand-in of the gb10.serving simulation: carries only the pinned version (no kernels)."""

__version__ = "0.6.18"
