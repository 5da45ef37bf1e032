"""Stand-in for flashinfer-python 0.6.18: the JIT path of the CUTLASS fused-MoE module only (see README.md)."""

__version__ = "0.6.18"
