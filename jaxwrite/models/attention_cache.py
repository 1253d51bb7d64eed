"""Attention of a cache pass (the engine's prefill chunks and decode steps): the work follows the fill.

The T new tokens of a call attend two sets of keys, merged by one online softmax:
- the cache's filled slots [0, lengths[b]) of their layer, as the cache was before the call, read in
  key blocks by a loop that stops after the last block any row has filled (`filled_blocks`): a 4,000
  token fill of a 16,384-slot bucket reads 4,096 slots, not 16,384, and a decode step costs the fill
  (a prefill chunk reads the blocks every row has filled without a mask, then the rest with one);
- their own keys and values (k, v of the call), causally, under the call's self mask.
Reading the new keys from the projections rather than from the cache lets the cache write
(`KVCache.write`) be the only user of the updated buffer, so XLA updates it in place: a decode step
reads the weights and the filled cache once and writes one slot per row.

Axes (jaxwrite.models): q [B, T, K, G, H]; keys and values [B, K, S, H]; a cache layer [L, B, K, S, H].
One implementation for every backend: no vendor kernel takes per-row cache offsets.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxwrite.models.attention_mask import AttentionMask
from jaxwrite.models.kv_cache import KVCache

_NEG = -1e30   # running-max start: finite, so a row with nothing attended yet never makes inf - inf
# Named scope of the loop over the cache's filled key blocks: its trip count is set by the fill at run
# time, and jaxwrite.aot counts it at the fill a compiled step assumes.
CACHE_KEY_BLOCKS_SCOPE = "jaxwrite_cache_key_blocks"
# A call of several tokens (a prefill chunk) runs the same pass as two loops: the key blocks every row has
# filled, with no mask to apply (on CPU the two selects per score cost 12-22 % of the attention), then the
# rest (at most one block when the rows' fills are equal). Neither name contains the other: jaxwrite.aot
# matches scopes by substring.
CACHE_FULL_BLOCKS_SCOPE = "jaxwrite_cache_full_blocks"
CACHE_EDGE_BLOCKS_SCOPE = "jaxwrite_cache_edge_blocks"


def cache_block(max_len: int, block: int) -> int:
    """Key block of the loop over a cache of max_len slots: the largest power of two <= `block`
    dividing max_len (engine buckets are powers of two or multiples of the block, so it is `block`)."""
    size = 1
    while size * 2 <= min(block, max_len) and max_len % (size * 2) == 0:
        size *= 2
    return size


def filled_blocks(lengths: jax.Array, block: int) -> jax.Array:
    """Key blocks holding any row's filled slots: ceil(max(lengths) / block) (a traced int32)."""
    return (jnp.max(lengths) + block - 1) // block


def cache_loop_trips(fill: int, block: int) -> dict[str, int]:
    """Trips of the cache pass's loops, by named scope, when every row has `fill` cached slots and key
    blocks of `block` (jaxwrite.aot's run_time_trips): a decode step's one loop, or a prefill chunk's two."""
    blocks = -(-fill // block)
    return {CACHE_KEY_BLOCKS_SCOPE: blocks, CACHE_FULL_BLOCKS_SCOPE: fill // block,
            CACHE_EDGE_BLOCKS_SCOPE: blocks - fill // block}


def cache_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: AttentionMask, cache: KVCache, layer,
                    block: int) -> jax.Array:
    """q [B, T, K, G, H] and the call's own k, v [B, K, T, H] (self-causal `mask` over the T tokens);
    `cache` before this call's write, read at layer `layer` (an int or a traced index). Returns
    [B, T, K, G, H] in q's dtype. A call longer than `block` runs by query blocks of `block`."""
    batch, seq, kv, groups, hd = q.shape
    dt = q.dtype
    k, v = k.astype(dt), v.astype(dt)
    qt = jnp.transpose(q, (0, 2, 3, 1, 4))                                  # [B, K, G, T, H]
    if seq <= block:
        out = _query_block(qt, k, v, mask.dense()[:, None, None], cache, layer, block)
    else:
        padded = mask.pad_to(block)
        pad = padded.seq - seq
        if pad:   # padded queries and keys match nothing (attention_mask.pad_to); their rows are dropped
            qt = jnp.pad(qt, [(0, 0)] * 3 + [(0, pad), (0, 0)])
            k, v = (jnp.pad(x, [(0, 0), (0, 0), (0, pad), (0, 0)]) for x in (k, v))

        def one(q0):
            qi = jax.lax.dynamic_slice_in_dim(qt, q0, block, axis=3)       # [B, K, G, bq, H]
            allowed = padded.block(q0, block, 0, padded.seq)[:, None, None]
            return _query_block(qi, k, v, allowed, cache, layer, block)

        blocks = jax.lax.map(one, jnp.arange(padded.seq // block) * block)  # [n, B, K, G, bq, H]
        out = jnp.moveaxis(blocks, 0, 3).reshape(batch, kv, groups, padded.seq, hd)[:, :, :, :seq]
    return jnp.transpose(out, (0, 3, 1, 2, 4))                              # [B, T, K, G, H]


def _query_block(qt, k, v, self_allowed, cache: KVCache, layer, block: int) -> jax.Array:
    """Queries qt [B, K, G, T, H] over the cache's filled blocks, then over the call's own keys k, v
    [B, K, T', H] where self_allowed [B, 1, 1, T, T']. Returns [B, K, G, T, H] in qt's dtype.

    The G x T queries of a kv head run as one [G T, H] matrix (M = G T below): batched matmuls with
    one batch axis pair and one free axis each, which XLA's CPU dots run several times faster than the
    same products with G and T apart.
    """
    batch, kv, groups, seq, hd = qt.shape
    dt = qt.dtype
    rows = groups * seq
    bk = cache_block(cache.max_len, block)
    qm = qt.reshape(batch, kv, rows, hd)                                    # [B, K, M, H]
    scale = hd ** -0.5

    def update(carry, kj, vj, allowed):
        """One online-softmax step over keys kj / vj [B, K, S, H]; allowed [B, 1, M or 1, S] or None."""
        m, l, acc = carry
        s = jnp.einsum("BKMH,BKSH->BKMS", qm, kj, preferred_element_type=jnp.float32) * scale
        if allowed is not None:   # None: every key allowed (a block all rows have filled)
            s = jnp.where(allowed, s, _NEG)
        m_new = jnp.maximum(m, s.max(-1))
        p = jnp.exp(s - m_new[..., None])                                   # [B, K, M, S]
        if allowed is not None:
            p = jnp.where(allowed, p, 0.0)
        alpha = jnp.exp(m - m_new)
        pv = jnp.einsum("BKMS,BKSH->BKMH", p.astype(dt), vj, preferred_element_type=jnp.float32)
        return m_new, alpha * l + p.sum(-1), alpha[..., None] * acc + pv

    def block_kv(j):
        start, size = (layer, 0, 0, j * bk, 0), (1, batch, kv, bk, hd)
        return (jax.lax.dynamic_slice(cache.k, start, size)[0].astype(dt),    # [B, K, bk, H]
                jax.lax.dynamic_slice(cache.v, start, size)[0].astype(dt))

    def filled_block(j, carry):
        filled = (j * bk + jnp.arange(bk))[None, :] < cache.lengths[:, None]  # [B, bk]
        return update(carry, *block_kv(j), filled[:, None, None, :])

    init = (jnp.full((batch, kv, rows), _NEG, jnp.float32), jnp.zeros((batch, kv, rows), jnp.float32),
            jnp.zeros((batch, kv, rows, hd), jnp.float32))
    blocks = filled_blocks(cache.lengths, bk)
    # Run-time trip counts, named for jaxwrite.aot (cache_loop_trips).
    if seq == 1:   # a decode step: one loop (its compiled bytes are what docs/TPU.md's decode table reads)
        with jax.named_scope(CACHE_KEY_BLOCKS_SCOPE):
            carry = jax.lax.fori_loop(0, blocks, filled_block, init)
    else:
        full = jnp.min(cache.lengths) // bk
        with jax.named_scope(CACHE_FULL_BLOCKS_SCOPE):
            carry = jax.lax.fori_loop(0, full, lambda j, c: update(c, *block_kv(j), None), init)
        with jax.named_scope(CACHE_EDGE_BLOCKS_SCOPE):
            carry = jax.lax.fori_loop(full, blocks, filled_block, carry)
    # The call's own keys: self_allowed [B, 1, G, T, T'] -> [B, 1, G T, T'] (G broadcast over rows).
    own = jnp.broadcast_to(self_allowed, (batch, 1, groups) + self_allowed.shape[3:]).reshape(batch, 1, rows, -1)
    _, l, acc = update(carry, k, v, own)
    out = acc / jnp.where(l > 0, l, 1.0)[..., None]                         # [B, K, M, H]
    return out.reshape(batch, kv, groups, seq, hd).astype(dt)
