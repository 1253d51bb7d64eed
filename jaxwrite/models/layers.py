"""Building blocks: RMSNorm, rotary position embedding, SwiGLU MLP. Parameters carry logical axes."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from jaxwrite.models.config import ModelConfig, RopeScaling
from jaxwrite.models.lora import adapted_weight
from jaxwrite.parallel import constrain


def param(rngs: nnx.Rngs, shape, axes, dtype, scale: float | None = None, init: str = "normal") -> nnx.Param:
    """A parameter with logical axis names; normal(0, scale) by default, or ones / zeros."""
    if init == "ones":
        value = jnp.ones(shape, dtype)
    elif init == "zeros":
        value = jnp.zeros(shape, dtype)
    else:
        value = (jax.random.normal(rngs.params(), shape, jnp.float32) * scale).astype(dtype)
    return nnx.Param(value, axes=tuple(axes))


class RMSNorm(nnx.Module):
    """y = x / sqrt(mean(x²) + eps) · w, computed in float32 as the reference implementations do."""

    def __init__(self, dim: int, eps: float, param_dtype, rngs: nnx.Rngs):
        self.weight = param(rngs, (dim,), ("norm",), param_dtype, init="ones")
        self.eps = eps

    def __call__(self, x: jax.Array) -> jax.Array:
        dtype = x.dtype
        x = x.astype(jnp.float32)
        x = x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + self.eps)
        return (self.weight.get_value().astype(jnp.float32) * x).astype(dtype)


def rope_inv_freq(head_dim: int, theta: float, scaling: RopeScaling | None) -> jax.Array:
    """Inverse frequencies [head_dim // 2], with Llama-3 or linear scaling when configured."""
    inv = 1.0 / (theta ** (jnp.arange(0, head_dim, 2, dtype=jnp.float32) / head_dim))
    if scaling is None:
        return inv
    if scaling.kind == "linear":
        return inv / scaling.factor
    if scaling.kind != "llama3":
        raise ValueError(f"rope scaling '{scaling.kind}': expected llama3 or linear")
    low_wavelen = scaling.original_max_position / scaling.low_freq_factor
    high_wavelen = scaling.original_max_position / scaling.high_freq_factor
    wavelen = 2 * math.pi / inv
    scaled = jnp.where(wavelen > low_wavelen, inv / scaling.factor, inv)
    smooth = (scaling.original_max_position / wavelen - scaling.low_freq_factor) / (
        scaling.high_freq_factor - scaling.low_freq_factor)
    smoothed = (1 - smooth) * scaled / scaling.factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return jnp.where(medium, smoothed, scaled)


def apply_rope(x: jax.Array, positions: jax.Array, inv_freq: jax.Array) -> jax.Array:
    """Rotates x [B, T, heads, H] by positions [B, T] (half-split convention)."""
    angles = positions.astype(jnp.float32)[..., None] * inv_freq          # [B, T, H/2]
    cos = jnp.cos(angles)[:, :, None, :]
    sin = jnp.sin(angles)[:, :, None, :]
    xf = x.astype(jnp.float32)
    x1, x2 = jnp.split(xf, 2, axis=-1)
    out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
    return out.astype(x.dtype)


class MLP(nnx.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs):
        d, f, pd = cfg.d_model, cfg.d_ff, jnp.dtype(cfg.param_dtype)
        self.gate = param(rngs, (d, f), ("embed", "mlp"), pd, d ** -0.5)
        self.up = param(rngs, (d, f), ("embed", "mlp"), pd, d ** -0.5)
        self.down = param(rngs, (f, d), ("mlp", "embed"), pd, f ** -0.5)
        self.dtype = jnp.dtype(cfg.dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        dt = self.dtype
        gate = jnp.einsum("BTD,DF->BTF", x, adapted_weight(self, "gate", dt))
        up = jnp.einsum("BTD,DF->BTF", x, adapted_weight(self, "up", dt))
        hidden = constrain(jax.nn.silu(gate) * up, ("batch", "seq", "act_mlp"))   # [B, T, F]
        return jnp.einsum("BTF,FD->BTD", hidden, adapted_weight(self, "down", dt))
