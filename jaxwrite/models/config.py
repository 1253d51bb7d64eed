"""ModelConfig: the shape of one decoder-only Transformer, with parameter and FLOP accounting."""
from __future__ import annotations

import dataclasses
import enum
from typing import Optional

# Architectures the one model class covers; each is a set of flags on ModelConfig.
MODEL_TYPES = ("qwen2", "llama", "qwen3")

# `model.attention`: auto picks splash on TPU, cuDNN flash on GPU when usable, else blockwise for long
# inputs and reference for short ones (jaxwrite.models.attention.resolve_attention).
ATTENTION_IMPLS = ("auto", "reference", "blockwise", "splash", "cudnn")


class Remat(enum.StrEnum):
    """What the backward pass recomputes instead of storing (`model.remat` in configs)."""
    NONE = "none"     # store every activation
    FULL = "full"     # recompute each layer from its input
    DOTS = "dots"     # save matmul outputs, recompute the rest


@dataclasses.dataclass(frozen=True)
class RopeScaling:
    """Llama-3 style frequency-dependent RoPE scaling (`rope_type: llama3`) or plain `linear`."""
    kind: str = "llama3"
    factor: float = 8.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position: int = 8192


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    vocab_size: int
    d_model: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    d_ff: int
    head_dim: Optional[int] = None          # defaults to d_model // num_heads
    model_type: str = "qwen2"
    qkv_bias: bool = True                   # Qwen2/2.5: bias on q, k, v projections
    qk_norm: bool = False                   # Qwen3: RMSNorm over head_dim on q and k
    tie_embeddings: bool = False
    rope_theta: float = 1_000_000.0
    rope_scaling: Optional[RopeScaling] = None
    rms_eps: float = 1e-6
    max_seq_len: int = 32768
    dtype: str = "float32"                  # compute dtype of activations and matmuls
    param_dtype: str = "float32"            # storage dtype of parameters
    remat: str = Remat.NONE                 # a Remat value
    attention: str = "auto"                 # an ATTENTION_IMPLS value
    attention_block: int = 512              # query / key block of the tiled attention paths

    def __post_init__(self):
        if self.model_type not in MODEL_TYPES:
            raise ValueError(f"model_type '{self.model_type}': expected one of {MODEL_TYPES}")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads {self.num_heads} must be a multiple of num_kv_heads {self.num_kv_heads}")
        if self.remat not in tuple(Remat):
            raise ValueError(f"remat '{self.remat}': expected one of {', '.join(Remat)}")
        if self.attention not in ATTENTION_IMPLS:
            raise ValueError(f"attention '{self.attention}': expected one of {', '.join(ATTENTION_IMPLS)}")
        if self.attention_block < 1:
            raise ValueError(f"attention_block {self.attention_block}: expected a positive block size")

    @property
    def dim_head(self) -> int:
        return self.head_dim or self.d_model // self.num_heads

    def replace(self, **changes) -> "ModelConfig":
        return dataclasses.replace(self, **changes)

    # --- accounting -------------------------------------------------------------------------
    def layer_param_count(self) -> int:
        d, h, k, dh, f = self.d_model, self.num_heads, self.num_kv_heads, self.dim_head, self.d_ff
        attn = d * h * dh + 2 * d * k * dh + h * dh * d
        if self.qkv_bias:
            attn += h * dh + 2 * k * dh
        if self.qk_norm:
            attn += 2 * dh
        return attn + 3 * d * f + 2 * d

    def param_count(self, include_embeddings: bool = True) -> int:
        n = self.num_layers * self.layer_param_count() + self.d_model  # + final norm
        head = 0 if self.tie_embeddings else self.vocab_size * self.d_model
        if include_embeddings:
            n += self.vocab_size * self.d_model + head
        return n

    def flops_per_token(self, seq_len: int, training: bool = True) -> float:
        """Matmul FLOPs per token: 2 per weight use (forward), ×3 for training (fwd + bwd),
        plus causal attention scores and values (≈ seq_len / 2 keys per query on average)."""
        matmul_params = self.num_layers * (self.layer_param_count() - 2 * self.d_model)
        matmul_params += self.vocab_size * self.d_model          # LM head (tied or not)
        attn = 2 * 2 * self.num_layers * self.num_heads * self.dim_head * (seq_len / 2)
        forward = 2 * matmul_params + attn
        return 3 * forward if training else forward

    def summary(self) -> str:
        return (f"{self.model_type} d_model={self.d_model} layers={self.num_layers} "
                f"heads={self.num_heads}/{self.num_kv_heads} d_ff={self.d_ff} vocab={self.vocab_size} "
                f"params={self.param_count() / 1e6:,.1f}M "
                f"train_flops/token@{min(self.max_seq_len, 4096)}="
                f"{self.flops_per_token(min(self.max_seq_len, 4096)) / 1e9:,.2f}G")
