"""Grouped-query attention with RoPE, optional QKV bias / q-k norm and a KV cache; the one attention entry
point (`attend`) that runs the implementation `model.attention` names, and the reference implementation."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from jaxwrite.models import attention_blockwise as blockwise
from jaxwrite.models.attention_kernels import cudnn_attention, cudnn_usable, splash_attention, splash_usable
from jaxwrite.models.attention_mask import AttentionMask
from jaxwrite.models.config import ATTENTION_IMPLS, ModelConfig
from jaxwrite.models.layers import RMSNorm, apply_rope, param, rope_inv_freq
from jaxwrite.parallel import active_mesh_rules, constrain

_MASKED = -1e30  # finite, so a fully masked (padding) row gives a uniform softmax, never NaN


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class KVCache:
    """Keys and values of a stack of layers plus the number of filled slots per row.

    New tokens of a call are written at slots [lengths[b], lengths[b] + seq); the caller must keep
    lengths + seq <= max_len (the inference engine sizes caches in buckets to guarantee it). Heads
    come before slots: a layer's [batch, kv_heads, max_len, head_dim] is already the batched-matmul
    layout attention wants.
    """
    k: jax.Array          # [layers, batch, kv_heads, max_len, head_dim]
    v: jax.Array
    lengths: jax.Array    # [batch] int32

    @property
    def max_len(self) -> int:
        return self.k.shape[3]

    @classmethod
    def zeros(cls, cfg: ModelConfig, batch: int, max_len: int, dtype=None, layers: int | None = None
              ) -> "KVCache":
        """An empty cache for `layers` layers (default: all of cfg's)."""
        dtype = jnp.dtype(dtype or cfg.dtype)
        shape = (cfg.num_layers if layers is None else layers, batch, cfg.num_kv_heads, max_len, cfg.dim_head)
        return cls(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype), jnp.zeros((batch,), jnp.int32))

    def write(self, layer, k: jax.Array, v: jax.Array) -> "KVCache":
        """Writes new keys / values k, v [batch, seq, kv_heads, head_dim] of layer `layer` (an int or a
        traced index) at each row's slots lengths[b] + t; lengths are unchanged (see `advance`). A
        scatter of the new slots only: inside the layer scan it updates the carried cache in place."""
        rows = jnp.arange(k.shape[0])[:, None]                         # [batch, 1]
        slots = self.slots(k.shape[1])                                 # [batch, seq]
        # Advanced indices (layer, rows, slots) around the kv_heads slice: updates are [batch, seq, kv, hd].
        return KVCache(self.k.at[layer, rows, :, slots].set(k.astype(self.k.dtype), mode="drop"),
                       self.v.at[layer, rows, :, slots].set(v.astype(self.v.dtype), mode="drop"), self.lengths)

    def slots(self, seq: int) -> jax.Array:
        """Slots (= positions) [batch, seq] that the next call's seq new tokens are written at."""
        return self.lengths[:, None] + jnp.arange(seq)[None, :]

    def advance(self, attention_mask: jax.Array) -> "KVCache":
        """The cache after a call whose valid new tokens are attention_mask [batch, seq]."""
        return dataclasses.replace(self, lengths=self.lengths + attention_mask.astype(jnp.int32).sum(-1))


class Attention(nnx.Module):
    def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs):
        d, h, k, dh = cfg.d_model, cfg.num_heads, cfg.num_kv_heads, cfg.dim_head
        pd = jnp.dtype(cfg.param_dtype)
        self.q = param(rngs, (d, h, dh), ("embed", "heads", "head_dim"), pd, d ** -0.5)
        self.k = param(rngs, (d, k, dh), ("embed", "kv_heads", "head_dim"), pd, d ** -0.5)
        self.v = param(rngs, (d, k, dh), ("embed", "kv_heads", "head_dim"), pd, d ** -0.5)
        self.o = param(rngs, (h, dh, d), ("heads", "head_dim", "embed"), pd, (h * dh) ** -0.5)
        if cfg.qkv_bias:
            self.q_bias = param(rngs, (h, dh), ("heads", "head_dim"), pd, init="zeros")
            self.k_bias = param(rngs, (k, dh), ("kv_heads", "head_dim"), pd, init="zeros")
            self.v_bias = param(rngs, (k, dh), ("kv_heads", "head_dim"), pd, init="zeros")
        if cfg.qk_norm:
            self.q_norm = RMSNorm(dh, cfg.rms_eps, pd, rngs)
            self.k_norm = RMSNorm(dh, cfg.rms_eps, pd, rngs)
        self.cfg = cfg

    def _project(self, x, name: str, eq: str) -> jax.Array:
        dt = jnp.dtype(self.cfg.dtype)
        out = jnp.einsum(eq, x, getattr(self, name).get_value().astype(dt))
        if self.cfg.qkv_bias:
            out = out + getattr(self, name + "_bias").get_value().astype(dt)
        return out

    def __call__(self, x: jax.Array, positions: jax.Array, mask: AttentionMask, cache: KVCache | None = None,
                 layer=0):
        """x [batch, seq, d_model]; positions [batch, seq]; mask over (seq, keys) (attention_mask.py).

        Without a cache x attends to itself and the mask must be self-causal, as self_attention_mask
        makes it. With one, x's keys and values are written into layer `layer` of the cache and x
        attends to that layer's first `mask.keys` slots (a window narrower than the cache skips its
        still-empty end). Returns (out [batch, seq, d_model], the updated cache or None).
        """
        cfg = self.cfg
        q = self._project(x, "q", "btd,dhk->bthk")                  # [batch, seq, heads, head_dim]
        k = self._project(x, "k", "btd,dgk->btgk")                  # [batch, seq, kv_heads, head_dim]
        v = self._project(x, "v", "btd,dgk->btgk")
        if cfg.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        inv_freq = rope_inv_freq(cfg.dim_head, cfg.rope_theta, cfg.rope_scaling)   # constant under jit
        q = constrain(apply_rope(q, positions, inv_freq), ("batch", "seq", "act_heads", None))
        k = apply_rope(k, positions, inv_freq)
        if cache is None:
            out = attend(q, k, v, mask, cfg.attention, cfg.attention_block, kv_layout="bskd")
        else:
            cache = cache.write(layer, k, v)
            keys = mask.keys
            out = attend(q, cache.k[layer, :, :, :keys], cache.v[layer, :, :, :keys], mask, cfg.attention,
                         cfg.attention_block)
        dt = jnp.dtype(cfg.dtype)
        return jnp.einsum("bthk,hkd->btd", out, self.o.get_value().astype(dt)), cache


# --- the one attention entry point ----------------------------------------------------------------

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
    """The implementation `impl` (a model.attention value) runs as for this call.

    Cache passes (prefill chunks, decode steps) have per-row causal offsets no vendor kernel takes,
    so they run blockwise when long and reference when short, whatever impl says.
    """
    platform = platform or _platform()
    long = mask.keys >= LONG_KEYS
    if impl not in ATTENTION_IMPLS:
        raise ValueError(f"model.attention '{impl}': expected one of {', '.join(ATTENTION_IMPLS)}")
    if not mask.self_causal and impl in ("auto", "splash", "cudnn"):
        return "blockwise" if long else "reference"
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
    return "blockwise" if long else "reference"


def attend(q: jax.Array, k: jax.Array, v: jax.Array, mask: AttentionMask, impl: str = "reference",
           block: int = 512, kv_layout: str = "bksd") -> jax.Array:
    """Grouped-query softmax attention, the one entry point of every attention call.

    q [batch, seq, heads, head_dim]; k, v [batch, kv_heads, keys, head_dim] (kv_layout "bksd", a cache
    layer's layout) or [batch, keys, kv_heads, head_dim] ("bskd", fresh projections); mask over (seq,
    keys). impl: a model.attention value (resolve_attention); block: query / key block of the tiled
    paths. Returns [batch, seq, heads, head_dim] in q's dtype.
    """
    batch, seq, heads, head_dim = q.shape
    kv_heads = k.shape[kv_layout.index("k")]
    impl = resolve_attention(impl, mask, q.dtype, head_dim)
    if impl == "splash":
        return splash_attention(q, k, v, mask, block)
    if impl == "cudnn":
        return cudnn_attention(q, k, v, mask, kv_layout)
    qg = q.reshape(batch, seq, kv_heads, heads // kv_heads, head_dim)
    k, v = k.astype(q.dtype), v.astype(q.dtype)
    if impl == "blockwise":
        if mask.self_causal:
            out = blockwise.self_attention(qg, k, v, mask, block)
        else:
            if kv_layout == "bskd":
                k, v = jnp.swapaxes(k, 1, 2), jnp.swapaxes(v, 1, 2)
            out = blockwise.cache_attention(qg, k, v, mask, block)
    else:
        out = reference_attention(qg, k, v, mask, kv_layout)
    return out.reshape(batch, seq, heads, head_dim)


# --- reference: the direct formula, by query blocks -------------------------------------------------

def reference_attention(qg: jax.Array, k: jax.Array, v: jax.Array, mask: AttentionMask, kv_layout: str
                        ) -> jax.Array:
    """Softmax attention that holds one query block's scores over all the keys it can see.

    qg [batch, seq, kv_heads, groups, hd]. A self-causal pass runs by query blocks, block i over keys
    [0, end_i) only, so the all-masked upper triangle of score blocks is never computed (~44% less
    work at 8 blocks). Returns [batch, seq, kv_heads, groups, hd].
    """
    seq = qg.shape[1]
    block = causal_query_block(seq) if mask.self_causal else None
    if block is None:
        return _attend(qg, k, v, mask.dense(), kv_layout, qg.dtype)
    axis = kv_layout.index("s")
    return jnp.concatenate([_attend(qg[:, s:s + block], jax.lax.slice_in_dim(k, 0, s + block, axis=axis),
                                    jax.lax.slice_in_dim(v, 0, s + block, axis=axis),
                                    mask.block(s, block, 0, s + block), kv_layout, qg.dtype)
                            for s in range(0, seq, block)], axis=1)


def causal_query_block(seq: int, max_blocks: int = 8, min_block: int = 64) -> int | None:
    """Query-block size for the reference causal attention, or None when one block is as good."""
    blocks = min(max_blocks, seq // min_block)
    if blocks < 2 or seq % blocks:
        return None
    return seq // blocks


def _attend(qg, k, v, mask, kv_layout: str, dt) -> jax.Array:
    """Softmax attention of qg [batch, q, kv, groups, hd] over keys k / v (layout kv_layout, "bskd" or
    "bksd"); mask [batch, q, keys]. Returns [batch, q, kv, groups, hd]."""
    scores = jnp.einsum(f"btkgd,{kv_layout}->bkgts", qg, k,
                        preferred_element_type=jnp.float32) * qg.shape[-1] ** -0.5
    scores = jnp.where(mask[:, None, None, :, :], scores, _MASKED)  # [batch, kv, groups, q, keys]
    probs = jax.nn.softmax(scores, axis=-1).astype(dt)
    # Batch dims leading in the output too: asking for [batch, q, ...] directly made XLA's CPU dot
    # contract the cache over its slot axis on a slow path (8x slower for one-token decode steps).
    out = jnp.einsum(f"bkgts,{kv_layout}->bkgtd", probs, v)
    return jnp.transpose(out, (0, 3, 1, 2, 4))


def default_positions(attention_mask: jax.Array, segment_ids: jax.Array | None) -> jax.Array:
    """Positions [batch, seq]: count of valid tokens before each, restarting at each new segment."""
    seq = attention_mask.shape[1]
    if segment_ids is None:
        return jnp.maximum(jnp.cumsum(attention_mask.astype(jnp.int32), axis=1) - 1, 0)
    idx = jnp.broadcast_to(jnp.arange(seq), segment_ids.shape)
    starts = jnp.concatenate([jnp.ones_like(segment_ids[:, :1], bool),
                              segment_ids[:, 1:] != segment_ids[:, :-1]], axis=1)
    start_idx = jax.lax.cummax(jnp.where(starts, idx, 0), axis=1)
    return idx - start_idx
