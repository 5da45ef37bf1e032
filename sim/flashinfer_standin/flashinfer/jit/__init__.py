"""JIT: cache layout (env), specs and ninja builds (core), the fused-MoE generators (fused_moe)."""
