"""Grouped-query attention with RoPE, optional QKV bias / q-k norm and a KV cache; the one attention entry
point of a no-cache pass (`attend`, running the implementation `model.attention` names) and the reference
implementation. Axes as in jaxwrite.models: keys and values are [B, K, S, H] everywhere."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from jaxwrite.models import attention_blockwise as blockwise
from jaxwrite.models.attention_cache import cache_attention
from jaxwrite.models.attention_kernels import cudnn_attention, cudnn_usable, splash_attention, splash_usable
from jaxwrite.models.attention_mask import AttentionMask
from jaxwrite.models.config import ATTENTION_IMPLS, ModelConfig
from jaxwrite.models.kv_cache import KVCache
from jaxwrite.models.layers import RMSNorm, apply_rope, param, rope_inv_freq
from jaxwrite.models.lora import adapted_weight
from jaxwrite.parallel import active_mesh_rules, constrain

_MASKED = -1e30  # finite, so a fully masked (padding) row gives a uniform softmax, never NaN


class Attention(nnx.Module):
    def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs):
        d, n, k, h = cfg.d_model, cfg.num_heads, cfg.num_kv_heads, cfg.dim_head
        pd = jnp.dtype(cfg.param_dtype)
        self.q = param(rngs, (d, n, h), ("embed", "heads", "head_dim"), pd, d ** -0.5)         # [D, N, H]
        self.k = param(rngs, (d, k, h), ("embed", "kv_heads", "head_dim"), pd, d ** -0.5)      # [D, K, H]
        self.v = param(rngs, (d, k, h), ("embed", "kv_heads", "head_dim"), pd, d ** -0.5)
        self.o = param(rngs, (n, h, d), ("heads", "head_dim", "embed"), pd, (n * h) ** -0.5)   # [N, H, D]
        if cfg.qkv_bias:
            self.q_bias = param(rngs, (n, h), ("heads", "head_dim"), pd, init="zeros")
            self.k_bias = param(rngs, (k, h), ("kv_heads", "head_dim"), pd, init="zeros")
            self.v_bias = param(rngs, (k, h), ("kv_heads", "head_dim"), pd, init="zeros")
        if cfg.qk_norm:
            self.q_norm = RMSNorm(h, cfg.rms_eps, pd, rngs)
            self.k_norm = RMSNorm(h, cfg.rms_eps, pd, rngs)
        self.cfg = cfg

    def _project(self, x, name: str, eq: str) -> jax.Array:
        dt = jnp.dtype(self.cfg.dtype)
        out = jnp.einsum(eq, x, adapted_weight(self, name, dt))
        if self.cfg.qkv_bias:
            out = out + getattr(self, name + "_bias").get_value().astype(dt)
        return out

    def __call__(self, x: jax.Array, positions: jax.Array, mask: AttentionMask, cache: KVCache | None = None,
                 layer=0) -> tuple[jax.Array, KVCache | None]:
        """x [B, T, D]; positions [B, T]; mask: self-causal over the T tokens (self_attention_mask).

        With a cache, the tokens also attend its filled slots of layer `layer` (attention_cache.py)
        and their keys and values are written there. Returns (out [B, T, D], the updated cache or None).
        """
        cfg = self.cfg
        q = constrain(self._project(x, "q", "BTD,DNH->BTNH"), ("batch", "seq", "act_heads", None))
        k = constrain(self._project(x, "k", "BTD,DKH->BTKH"), ("batch", "seq", "kv_heads", None))
        v = constrain(self._project(x, "v", "BTD,DKH->BTKH"), ("batch", "seq", "kv_heads", None))
        if cfg.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        inv_freq = rope_inv_freq(cfg.dim_head, cfg.rope_theta, cfg.rope_scaling)   # constant under jit
        q = constrain(apply_rope(q, positions, inv_freq), ("batch", "seq", "act_heads", None))
        # Keys and values in the one K/V layout [B, K, T, H].
        k = jnp.swapaxes(apply_rope(k, positions, inv_freq), 1, 2)
        v = jnp.swapaxes(v, 1, 2)
        if cache is None:
            out = attend(q, k, v, mask, cfg.attention, cfg.attention_block)
        else:
            batch, seq, heads, hd = q.shape
            # The cache's rows (cache_batch), where they live: under the engine's weight-stationary
            # decode rules the rest of the step keeps the rows on every fsdp shard (parallel.rules).
            qg = constrain(q.reshape(batch, seq, cfg.num_kv_heads, heads // cfg.num_kv_heads, hd),
                           ("cache_batch", "seq", "kv_heads", None, None))                  # [B, T, K, G, H]
            k, v = (constrain(x, ("cache_batch", "kv_heads", "seq", None)) for x in (k, v))
            cache = cache.write(layer, k, v)
            out = cache_attention(qg, k, v, mask, cache, layer, cfg.attention_block).reshape(q.shape)
            out = constrain(out, ("batch", "seq", "act_heads", None))
        dt = jnp.dtype(cfg.dtype)
        return jnp.einsum("BTNH,NHD->BTD", out, adapted_weight(self, "o", dt)), cache


# --- the one attention entry point of a no-cache pass ----------------------------------------------

# `auto` switches the XLA paths from reference to blockwise at this many keys: below it one query
# block of reference scores is small and its single fused softmax is the fastest on CPU.
LONG_KEYS = 4096


def _platform() -> str:
    """The platform being compiled for: the active mesh's devices (a TPU topology compiled on a CPU
    host reports tpu), else the default backend."""
    active = active_mesh_rules()
    if active is not None:
        return active[0].devices.flat[0].platform
    return jax.default_backend()


def resolve_attention(impl: str, mask: AttentionMask, dtype, head_dim: int, platform: str | None = None) -> str:
    """The implementation `impl` (a model.attention value) runs as for a no-cache (self-causal) pass.
    Cache passes run attention_cache.cache_attention on every platform."""
    platform = platform or _platform()
    if impl not in ATTENTION_IMPLS:
        raise ValueError(f"model.attention '{impl}': expected one of {', '.join(ATTENTION_IMPLS)}")
    if not mask.self_causal:
        raise ValueError("attend takes a self-causal mask (self_attention_mask); a cache pass runs cache_attention")
    if impl == "splash" and platform != "tpu":
        raise ValueError(f"model.attention 'splash' needs a TPU, found {platform}; use auto or blockwise")
    if impl == "cudnn" and platform != "gpu":
        raise ValueError(f"model.attention 'cudnn' needs a GPU, found {platform}; use auto or blockwise")
    if impl != "auto":
        return impl
    if platform == "tpu" and splash_usable(head_dim):
        return "splash"
    if platform == "gpu" and not mask.packed and cudnn_usable(dtype, head_dim):
        return "cudnn"
    return "blockwise" if mask.keys >= LONG_KEYS else "reference"


def attend(q: jax.Array, k: jax.Array, v: jax.Array, mask: AttentionMask, impl: str = "reference",
           block: int = 512) -> jax.Array:
    """Grouped-query causal softmax attention of a no-cache pass (training, scoring a whole sequence).

    q [B, T, N, H]; k, v [B, K, S, H] with S = T; mask self-causal over the T tokens. impl: a
    model.attention value (resolve_attention); block: query / key block of the tiled paths. Returns
    [B, T, N, H] in q's dtype.
    """
    batch, seq, heads, hd = q.shape
    kv_heads = k.shape[1]
    impl = resolve_attention(impl, mask, q.dtype, hd)
    if impl == "splash":
        return splash_attention(q, k, v, mask, block)
    if impl == "cudnn":
        return cudnn_attention(q, k, v, mask)
    qg = q.reshape(batch, seq, kv_heads, heads // kv_heads, hd)                    # [B, T, K, G, H]
    k, v = k.astype(q.dtype), v.astype(q.dtype)
    if impl == "blockwise":
        out = blockwise.self_attention(qg, k, v, mask, block)
    else:
        out = reference_attention(qg, k, v, mask)
    return out.reshape(batch, seq, heads, hd)


# --- reference: the direct formula, by query blocks -------------------------------------------------

def reference_attention(qg: jax.Array, k: jax.Array, v: jax.Array, mask: AttentionMask) -> jax.Array:
    """Softmax attention that holds one query block's scores over all the keys it can see.

    qg [B, T, K, G, H]; k, v [B, K, S, H]. A self-causal pass runs by query blocks, block i over keys
    [0, end_i) only, so the all-masked upper triangle of score blocks is never computed (~44% less
    work at 8 blocks). Returns [B, T, K, G, H].
    """
    seq = qg.shape[1]
    block = causal_query_block(seq) if mask.self_causal else None
    if block is None:
        return _attend(qg, k, v, mask.dense(), qg.dtype)
    return jnp.concatenate([_attend(qg[:, s:s + block], k[:, :, :s + block], v[:, :, :s + block],
                                    mask.block(s, block, 0, s + block), qg.dtype)
                            for s in range(0, seq, block)], axis=1)


def causal_query_block(seq: int, max_blocks: int = 8, min_block: int = 64) -> int | None:
    """Query-block size for the reference causal attention, or None when one block is as good."""
    blocks = min(max_blocks, seq // min_block)
    if blocks < 2 or seq % blocks:
        return None
    return seq // blocks


def _attend(qg, k, v, mask, dt) -> jax.Array:
    """Softmax attention of qg [B, T, K, G, H] over keys k / v [B, K, S, H]; mask [B, T, S].
    Returns [B, T, K, G, H]."""
    scores = jnp.einsum("BTKGH,BKSH->BKGTS", qg, k, preferred_element_type=jnp.float32) * qg.shape[-1] ** -0.5
    scores = jnp.where(mask[:, None, None, :, :], scores, _MASKED)                  # [B, K, G, T, S]
    probs = jax.nn.softmax(scores, axis=-1).astype(dt)
    # Batch dims leading in the output too: asking for [B, T, ...] directly made XLA's CPU dot
    # contract the keys over their slot axis on a slow path (8x slower for one-token decode steps).
    out = jnp.einsum("BKGTS,BKSH->BKGTH", probs, v)
    return jnp.transpose(out, (0, 3, 1, 2, 4))


def default_positions(attention_mask: jax.Array, segment_ids: jax.Array | None) -> jax.Array:
    """Positions [B, T]: count of valid tokens before each, restarting at each new segment."""
    seq = attention_mask.shape[1]
    if segment_ids is None:
        return jnp.maximum(jnp.cumsum(attention_mask.astype(jnp.int32), axis=1) - 1, 0)
    idx = jnp.broadcast_to(jnp.arange(seq), segment_ids.shape)
    starts = jnp.concatenate([jnp.ones_like(segment_ids[:, :1], bool),
                              segment_ids[:, 1:] != segment_ids[:, :-1]], axis=1)
    start_idx = jax.lax.cummax(jnp.where(starts, idx, 0), axis=1)
    return idx - start_idx
