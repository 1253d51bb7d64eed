"""Named model shapes: tiny CPU configs and the real Qwen2.5 / Llama-3.1 / Llama-3.2 / Qwen3 / SmolLM2 shapes.

Shapes are from the models' published config.json files. A run that starts from a checkpoint
(`model.init_from`) takes the checkpoint's own config, so presets matter for planning (memory, FLOPs,
sharding: `jaxwrite model info`, `jaxwrite compile`) and for from-scratch runs.
"""
from __future__ import annotations

from jaxwrite.models.config import ModelConfig, RopeScaling

_QWEN25 = dict(model_type="qwen2", qkv_bias=True, rope_theta=1_000_000.0, max_seq_len=32768)
# Llama-3.2 1B/3B: tied embeddings, Llama-3 RoPE scaling by 32 over an 8k original context.
_LLAMA32 = dict(vocab_size=128256, d_ff=8192, num_kv_heads=8, model_type="llama", qkv_bias=False, tie_embeddings=True,
                rope_theta=500_000.0, rope_scaling=RopeScaling(factor=32.0), rms_eps=1e-5, max_seq_len=131072)
# SmolLM2 (HuggingFaceTB): Llama architecture, 49,152-token vocabulary, tied embeddings, 8k context.
_SMOLLM2 = dict(vocab_size=49152, model_type="llama", qkv_bias=False, tie_embeddings=True, rms_eps=1e-5,
                max_seq_len=8192)

PRESETS: dict[str, ModelConfig] = {
    # CPU configs for tests, quickstart and benchmarks.
    "tiny": ModelConfig(vocab_size=2048, d_model=64, num_layers=2, num_heads=4, num_kv_heads=2,
                        d_ff=128, tie_embeddings=True, max_seq_len=2048,
                        **{k: v for k, v in _QWEN25.items() if k != "max_seq_len"}),
    "small": ModelConfig(vocab_size=32000, d_model=512, num_layers=8, num_heads=8, num_kv_heads=2,
                         d_ff=1408, max_seq_len=4096, **{k: v for k, v in _QWEN25.items() if k != "max_seq_len"}),
    # Qwen2.5 family.
    "qwen2.5-0.5b": ModelConfig(vocab_size=151936, d_model=896, num_layers=24, num_heads=14, num_kv_heads=2,
                                d_ff=4864, tie_embeddings=True, **_QWEN25),
    "qwen2.5-1.5b": ModelConfig(vocab_size=151936, d_model=1536, num_layers=28, num_heads=12, num_kv_heads=2,
                                d_ff=8960, tie_embeddings=True, **_QWEN25),
    "qwen2.5-3b": ModelConfig(vocab_size=151936, d_model=2048, num_layers=36, num_heads=16, num_kv_heads=2,
                              d_ff=11008, tie_embeddings=True, **_QWEN25),
    "qwen2.5-7b": ModelConfig(vocab_size=152064, d_model=3584, num_layers=28, num_heads=28, num_kv_heads=4,
                              d_ff=18944, **_QWEN25),
    "qwen2.5-14b": ModelConfig(vocab_size=152064, d_model=5120, num_layers=48, num_heads=40, num_kv_heads=8,
                               d_ff=13824, rms_eps=1e-5, **_QWEN25),
    "qwen2.5-32b": ModelConfig(vocab_size=152064, d_model=5120, num_layers=64, num_heads=40, num_kv_heads=8,
                               d_ff=27648, rms_eps=1e-5, **_QWEN25),
    "qwen2.5-72b": ModelConfig(vocab_size=152064, d_model=8192, num_layers=80, num_heads=64, num_kv_heads=8,
                               d_ff=29568, rms_eps=1e-5, **_QWEN25),
    # Other families reachable by flags.
    "llama-3.1-8b": ModelConfig(vocab_size=128256, d_model=4096, num_layers=32, num_heads=32, num_kv_heads=8,
                                d_ff=14336, model_type="llama", qkv_bias=False, rope_theta=500_000.0,
                                rope_scaling=RopeScaling(), rms_eps=1e-5, max_seq_len=131072),
    "llama-3.2-1b": ModelConfig(d_model=2048, num_layers=16, num_heads=32, head_dim=64, **_LLAMA32),
    "llama-3.2-3b": ModelConfig(d_model=3072, num_layers=28, num_heads=24, head_dim=128, **_LLAMA32),
    "smollm2-135m": ModelConfig(d_model=576, num_layers=30, num_heads=9, num_kv_heads=3, d_ff=1536,
                                rope_theta=100_000.0, **_SMOLLM2),
    "smollm2-360m": ModelConfig(d_model=960, num_layers=32, num_heads=15, num_kv_heads=5, d_ff=2560,
                                rope_theta=100_000.0, **_SMOLLM2),
    "smollm2-1.7b": ModelConfig(d_model=2048, num_layers=24, num_heads=32, num_kv_heads=32, d_ff=8192,
                                rope_theta=130_000.0, **_SMOLLM2),
    "qwen3-8b": ModelConfig(vocab_size=151936, d_model=4096, num_layers=36, num_heads=32, num_kv_heads=8,
                            head_dim=128, d_ff=12288, model_type="qwen3", qkv_bias=False, qk_norm=True,
                            rope_theta=1_000_000.0, max_seq_len=40960),
}


def get_preset(name: str, **overrides) -> ModelConfig:
    """Returns a preset by name, optionally with fields replaced (e.g. vocab_size=...)."""
    if name not in PRESETS:
        raise KeyError(f"unknown model preset '{name}'; expected one of: {', '.join(PRESETS)}")
    return PRESETS[name].replace(**overrides) if overrides else PRESETS[name]
