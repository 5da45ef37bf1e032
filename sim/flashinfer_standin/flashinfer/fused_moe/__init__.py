"""fused_moe: only get_cutlass_fused_moe_module, the call vLLM's flashinfer_cutlass MoE path makes."""
