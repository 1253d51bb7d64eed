"""Grouped-query attention with RoPE, optional QKV bias / q-k norm, masks and a KV cache."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import nnx

from jaxwrite.models.config import ModelConfig
from jaxwrite.models.layers import RMSNorm, apply_rope, param
from jaxwrite.parallel import constrain

_MASKED = -1e30  # finite, so a fully masked (padding) row gives a uniform softmax, never NaN


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class KVCache:
    """Keys and values for all layers plus the number of filled slots per row.

    New tokens of a call are written at slots [lengths[b], lengths[b] + seq); the caller must keep
    lengths + seq <= max_len (the inference engine sizes caches in buckets to guarantee it).

    Two layouts: one stacked array per k / v (the layer scan carries it and indexes it by layer), or a
    tuple with one array per layer (unrolled decoding: every layer reads and updates its own buffer,
    so no step copies a layer's slice out of a stacked one). Heads come before slots either way: a
    layer's [batch, kv_heads, max_len, head_dim] is already the batched-matmul layout attention wants.
    """
    k: jax.Array | tuple[jax.Array, ...]   # [layers, batch, kv_heads, max_len, head_dim] or layers x [batch, ...]
    v: jax.Array | tuple[jax.Array, ...]
    lengths: jax.Array                     # [batch] int32

    @property
    def per_layer(self) -> bool:
        return isinstance(self.k, tuple)

    @property
    def max_len(self) -> int:
        return (self.k[0] if self.per_layer else self.k).shape[-2]

    @classmethod
    def zeros(cls, cfg: ModelConfig, batch: int, max_len: int, dtype=None, per_layer: bool = False) -> "KVCache":
        dtype = jnp.dtype(dtype or cfg.dtype)
        layer = (batch, cfg.num_kv_heads, max_len, cfg.dim_head)
        lengths = jnp.zeros((batch,), jnp.int32)
        if per_layer:
            return cls(tuple(jnp.zeros(layer, dtype) for _ in range(cfg.num_layers)),
                       tuple(jnp.zeros(layer, dtype) for _ in range(cfg.num_layers)), lengths)
        shape = (cfg.num_layers, *layer)
        return cls(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype), lengths)


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

    def __call__(self, x: jax.Array, positions: jax.Array, mask: jax.Array, inv_freq: jax.Array,
                 cache: tuple[jax.Array, jax.Array, jax.Array, jax.Array] | None = None):
        """x [batch, seq, d_model]; positions [batch, seq]; mask [batch, seq, keys] (True = attend; without
        a cache it must be causal, as build_mask makes it, since attention then runs by query blocks).

        With `cache=(k, v, lengths, layer)` — the caches of ALL layers [layers, batch, kv_heads, max_len,
        head_dim] ×2, the filled slots per row [batch] and this layer's index — only the new keys and
        values are scattered into the stacked caches (in place inside the layer scan, so a decode step
        never copies the whole cache) and attention runs over this layer's max_len slots. With
        layer=None, k and v are this layer's own caches [batch, kv_heads, max_len, head_dim].
        Returns (out, (k, v)) with the updated caches.
        """
        cfg = self.cfg
        dt = jnp.dtype(cfg.dtype)
        batch, seq, _ = x.shape
        q = self._project(x, "q", "btd,dhk->bthk")                  # [batch, seq, heads, head_dim]
        k = self._project(x, "k", "btd,dgk->btgk")                  # [batch, seq, kv_heads, head_dim]
        v = self._project(x, "v", "btd,dgk->btgk")
        if cfg.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q = constrain(apply_rope(q, positions, inv_freq), ("batch", "seq", "act_heads", None))
        k = apply_rope(k, positions, inv_freq)
        new_cache = None
        if cache is not None:
            k_all, v_all, lengths, layer = cache
            rows = jnp.arange(batch)[:, None]                          # [batch, 1]
            slots = lengths[:, None] + jnp.arange(seq)[None, :]        # [batch, seq]
            # Advanced indices (rows, slots) around the kv_heads slice: updates are [batch, seq, kv, hd].
            if layer is None:
                k_all = k_all.at[rows, :, slots].set(k.astype(k_all.dtype), mode="drop")
                v_all = v_all.at[rows, :, slots].set(v.astype(v_all.dtype), mode="drop")
                k, v = k_all, v_all
            else:
                k_all = k_all.at[layer, rows, :, slots].set(k.astype(k_all.dtype), mode="drop")
                v_all = v_all.at[layer, rows, :, slots].set(v.astype(v_all.dtype), mode="drop")
                k, v = k_all[layer], v_all[layer]                      # [batch, kv_heads, max_len, head_dim]
            new_cache = (k_all, v_all)
            # A mask narrower than the cache (the caller's key window) limits attention to the
            # slots it covers: prefill chunks skip the still-empty end of the cache bucket.
            keys = mask.shape[-1]
            if keys < k.shape[2]:
                k, v = k[:, :, :keys], v[:, :, :keys]
            k_spec = "bksd"
        else:
            k_spec = "bskd"
        groups = cfg.num_heads // cfg.num_kv_heads
        qg = q.reshape(batch, seq, cfg.num_kv_heads, groups, cfg.dim_head)
        k, v = k.astype(dt), v.astype(dt)
        block = None if cache is not None else causal_query_block(seq)
        if block is None:
            out = _attend(qg, k, v, mask, k_spec, dt)
        else:
            # Causal self-attention by query blocks: block i only needs keys [0, end_i), so the
            # all-masked upper triangle of score blocks is never computed (~44% less work at 8 blocks).
            out = jnp.concatenate([_attend(qg[:, s:s + block], k[:, :s + block], v[:, :s + block],
                                           mask[:, s:s + block, :s + block], k_spec, dt)
                                   for s in range(0, seq, block)], axis=1)
        out = out.reshape(batch, seq, cfg.num_heads, cfg.dim_head)
        out = jnp.einsum("bthk,hkd->btd", out, self.o.get_value().astype(dt))
        return out, new_cache


def causal_query_block(seq: int, max_blocks: int = 8, min_block: int = 64) -> int | None:
    """Query-block size for blockwise causal attention, or None when one block is as good."""
    blocks = min(max_blocks, seq // min_block)
    if blocks < 2 or seq % blocks:
        return None
    return seq // blocks


def _attend(qg, k, v, mask, k_spec: str, dt) -> jax.Array:
    """Softmax attention of qg [batch, q, kv, groups, hd] over keys k / v (layout k_spec, "bskd" or
    "bksd"); mask [batch, q, keys]. Returns [batch, q, kv, groups, hd]."""
    scores = jnp.einsum(f"btkgd,{k_spec}->bkgts", qg, k,
                        preferred_element_type=jnp.float32) * qg.shape[-1] ** -0.5
    scores = jnp.where(mask[:, None, None, :, :], scores, _MASKED)  # [batch, kv, groups, q, keys]
    probs = jax.nn.softmax(scores, axis=-1).astype(dt)
    # Batch dims leading in the output too: asking for [batch, q, ...] directly made XLA's CPU dot
    # contract the cache over its slot axis on a slow path (8x slower for one-token decode steps).
    out = jnp.einsum(f"bkgts,{k_spec}->bkgtd", probs, v)
    return jnp.transpose(out, (0, 3, 1, 2, 4))


def build_mask(attention_mask: jax.Array, segment_ids: jax.Array | None) -> jax.Array:
    """Causal mask [batch, seq, seq] for a no-cache call; packed rows attend within their segment only."""
    seq = attention_mask.shape[1]
    idx = jnp.arange(seq)
    mask = (idx[:, None] >= idx[None, :])[None] & attention_mask[:, None, :].astype(bool)
    if segment_ids is not None:
        mask &= segment_ids[:, :, None] == segment_ids[:, None, :]
    return mask


def build_cache_mask(lengths: jax.Array, attention_mask: jax.Array, max_len: int) -> jax.Array:
    """Mask [batch, seq, max_len] for new tokens written at slots lengths[b] + t (right-padded rows)."""
    seq = attention_mask.shape[1]
    q_slot = lengths[:, None] + jnp.arange(seq)[None, :]              # [batch, seq]
    new_len = lengths + attention_mask.astype(jnp.int32).sum(-1)       # [batch]
    slot = jnp.arange(max_len)[None, None, :]
    return (slot <= q_slot[:, :, None]) & (slot < new_len[:, None, None])


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
