"""Blockwise online-softmax attention in plain XLA: the portable long-context path.

No array larger than one query block x one key block of scores ever exists:
- `self_attention` (training, a no-cache forward): one `lax.scan` over the lower-triangular (query
  block, key block) pairs only, so a causal pass does the causal half of the work and the compiled
  loop has a static trip count of n (n + 1) / 2 for n blocks. Its backward (custom_vjp) recomputes
  each pair's scores from the saved log-sum-exp, FlashAttention style, in a second scan over the
  same pairs; nothing per pair is stored.
- `cache_attention` (the engine's prefill chunks and decode steps): per query block, a loop over key
  blocks that stops after the last block any of its queries can see (a half-empty cache bucket costs
  half). Forward only: decoding is never differentiated.

Grouped-query layout throughout: q [batch, seq, kv_heads, groups, head_dim]; k / v keep kv_heads.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxwrite.models.attention_mask import PAD_KV_SEGMENT, PAD_Q_SEGMENT, AttentionMask

_NEG = -1e30   # running-max start: finite, so a row with nothing attended yet never makes inf - inf
# Named scope of the cache pass's loop over key blocks: its trip count is set by the cache's fill at
# run time, and jaxwrite.aot counts it at the fill a compiled step assumes.
CACHE_KEY_BLOCKS_SCOPE = "jaxwrite_cache_key_blocks"


def causal_block_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(query block, key block) indices of the n (n + 1) / 2 pairs on or below the diagonal, grouped
    by query block."""
    qi, kj = np.tril_indices(n)
    return qi.astype(np.int32), kj.astype(np.int32)


def self_block_size(seq: int, block: int) -> int:
    """Block used for a self-attention pass of `seq` tokens: `block`, or the whole (short) sequence."""
    return seq if seq <= block else block


# --- self-attention (causal, differentiable) ----------------------------------------------------

def self_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: AttentionMask, block: int,
                   unroll: int = 1) -> jax.Array:
    """q [batch, seq, kv, groups, hd]; k, v [batch, seq, kv, hd]; mask self-causal over seq.
    Returns [batch, seq, kv, groups, hd] in q's dtype. `unroll` (static) unrolls the pair loops, which
    lets a benchmark read the loop body's compiled FLOPs (see benchmarks/attention_compile.py)."""
    if not mask.self_causal:
        raise ValueError("self_attention needs a self-causal mask")
    seq = q.shape[1]
    b = self_block_size(seq, block)
    padded = mask.pad_to(b)
    pad = padded.seq - seq
    if pad:
        widths = [(0, 0), (0, pad)] + [(0, 0)] * (q.ndim - 2)
        q, k, v = jnp.pad(q, widths), jnp.pad(k, widths[:-1]), jnp.pad(v, widths[:-1])
    out = _self_attention(q, k, v, padded, b, unroll)
    return out[:, :seq]


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5))
def _self_attention(q, k, v, mask, block, unroll):
    return _self_forward(q, k, v, mask, block, unroll)[0]


def _pairs_xs(seq: int, block: int):
    qi, kj = causal_block_pairs(seq // block)
    return jnp.asarray(qi) * block, jnp.asarray(kj) * block          # [pairs] start offsets


def _scores(qi, kj, mask: AttentionMask, q0, k0, block: int):
    """Masked scaled scores [batch, kv, groups, bq, bk] (f32) and the block mask [batch, 1, 1, bq, bk]."""
    s = jnp.einsum("btkgd,bskd->bkgts", qi, kj, preferred_element_type=jnp.float32) * qi.shape[-1] ** -0.5
    allowed = mask.block(q0, block, k0, block)[:, None, None]
    return jnp.where(allowed, s, _NEG), allowed


def _self_forward(q, k, v, mask, block, unroll):
    batch, seq, kv, groups, hd = q.shape
    dt = q.dtype
    m = jnp.full((batch, kv, groups, seq), _NEG, jnp.float32)          # running max per query
    l = jnp.zeros((batch, kv, groups, seq), jnp.float32)               # running softmax denominator
    acc = jnp.zeros((batch, seq, kv, groups, hd), jnp.float32)         # running numerator @ v

    def pair(carry, offsets):
        m, l, acc = carry
        q0, k0 = offsets
        qi = jax.lax.dynamic_slice_in_dim(q, q0, block, axis=1)        # [batch, bq, kv, groups, hd]
        kj = jax.lax.dynamic_slice_in_dim(k, k0, block, axis=1)        # [batch, bk, kv, hd]
        vj = jax.lax.dynamic_slice_in_dim(v, k0, block, axis=1)
        s, allowed = _scores(qi, kj, mask, q0, k0, block)
        m_old = jax.lax.dynamic_slice_in_dim(m, q0, block, axis=3)
        m_new = jnp.maximum(m_old, s.max(-1))
        p = jnp.where(allowed, jnp.exp(s - m_new[..., None]), 0.0)    # [batch, kv, groups, bq, bk]
        alpha = jnp.exp(m_old - m_new)
        l_blk = alpha * jax.lax.dynamic_slice_in_dim(l, q0, block, axis=3) + p.sum(-1)
        pv = jnp.einsum("bkgts,bskd->btkgd", p.astype(dt), vj, preferred_element_type=jnp.float32)
        a_old = jax.lax.dynamic_slice_in_dim(acc, q0, block, axis=1)
        a_new = jnp.transpose(alpha, (0, 3, 1, 2))[..., None] * a_old + pv
        return (jax.lax.dynamic_update_slice_in_dim(m, m_new, q0, axis=3),
                jax.lax.dynamic_update_slice_in_dim(l, l_blk, q0, axis=3),
                jax.lax.dynamic_update_slice_in_dim(acc, a_new, q0, axis=1)), None

    (m, l, acc), _ = jax.lax.scan(pair, (m, l, acc), _pairs_xs(seq, block), unroll=unroll)
    safe_l = jnp.where(l > 0, l, 1.0)
    out = (acc / jnp.transpose(safe_l, (0, 3, 1, 2))[..., None]).astype(dt)
    lse = jnp.where(l > 0, m + jnp.log(safe_l), 0.0)                   # [batch, kv, groups, seq]
    return out, lse


def _self_fwd(q, k, v, mask, block, unroll):
    out, lse = _self_forward(q, k, v, mask, block, unroll)
    return out, (q, k, v, mask, out, lse)


def _self_bwd(block, unroll, res, dout):
    q, k, v, mask, out, lse = res
    seq, hd = q.shape[1], q.shape[-1]
    dt = q.dtype
    scale = hd ** -0.5
    # delta_i = sum_d dout * out: the softmax-Jacobian term, one number per query and head.
    delta = jnp.einsum("btkgd,btkgd->bkgt", dout.astype(jnp.float32), out.astype(jnp.float32))
    dq = jnp.zeros(q.shape, jnp.float32)
    dk = jnp.zeros(k.shape, jnp.float32)
    dv = jnp.zeros(v.shape, jnp.float32)

    def pair(carry, offsets):
        dq, dk, dv = carry
        q0, k0 = offsets
        qi = jax.lax.dynamic_slice_in_dim(q, q0, block, axis=1)
        kj = jax.lax.dynamic_slice_in_dim(k, k0, block, axis=1)
        vj = jax.lax.dynamic_slice_in_dim(v, k0, block, axis=1)
        doi = jax.lax.dynamic_slice_in_dim(dout, q0, block, axis=1).astype(dt)
        s, allowed = _scores(qi, kj, mask, q0, k0, block)
        lse_i = jax.lax.dynamic_slice_in_dim(lse, q0, block, axis=3)
        p = jnp.where(allowed, jnp.exp(s - lse_i[..., None]), 0.0)    # [batch, kv, groups, bq, bk]
        dv_j = jnp.einsum("bkgts,btkgd->bskd", p.astype(dt), doi, preferred_element_type=jnp.float32)
        dp = jnp.einsum("btkgd,bskd->bkgts", doi, vj, preferred_element_type=jnp.float32)
        ds = (p * (dp - jax.lax.dynamic_slice_in_dim(delta, q0, block, axis=3)[..., None])).astype(dt)
        dq_i = jnp.einsum("bkgts,bskd->btkgd", ds, kj, preferred_element_type=jnp.float32) * scale
        dk_j = jnp.einsum("bkgts,btkgd->bskd", ds, qi, preferred_element_type=jnp.float32) * scale

        def add(x, upd, start):
            return jax.lax.dynamic_update_slice_in_dim(
                x, jax.lax.dynamic_slice_in_dim(x, start, block, axis=1) + upd, start, axis=1)
        return (add(dq, dq_i, q0), add(dk, dk_j, k0), add(dv, dv_j, k0)), None

    (dq, dk, dv), _ = jax.lax.scan(pair, (dq, dk, dv), _pairs_xs(seq, block), unroll=unroll)
    return dq.astype(q.dtype), dk.astype(k.dtype), dv.astype(v.dtype), None


_self_attention.defvjp(_self_fwd, _self_bwd)


# --- attention over a KV cache (forward only) ---------------------------------------------------

def cache_attention(q: jax.Array, k: jax.Array, v: jax.Array, mask: AttentionMask, block: int) -> jax.Array:
    """q [batch, seq, kv, groups, hd] (new tokens); k, v [batch, kv, keys, hd] (a cache layer's
    window); mask over (seq, keys). Returns [batch, seq, kv, groups, hd] in q's dtype."""
    batch, seq, kv, groups, hd = q.shape
    keys = k.shape[2]
    bq = min(seq, block)
    q_pad = -seq % bq
    if q_pad:   # padded queries match no key; their rows are dropped below
        q = jnp.pad(q, [(0, 0), (0, q_pad), (0, 0), (0, 0), (0, 0)])
        mask = AttentionMask(jnp.pad(mask.q_segment, ((0, 0), (0, q_pad)), constant_values=PAD_Q_SEGMENT),
                             mask.kv_segment, jnp.pad(mask.q_slot, ((0, 0), (0, q_pad))))
    bk = min(keys, block)
    k_pad = -keys % bk
    if k_pad:   # cache windows are powers of two, so this copy is rare
        k = jnp.pad(k, [(0, 0), (0, 0), (0, k_pad), (0, 0)])
        v = jnp.pad(v, [(0, 0), (0, 0), (0, k_pad), (0, 0)])
        mask = AttentionMask(mask.q_segment, jnp.pad(mask.kv_segment, ((0, 0), (0, k_pad)),
                                                     constant_values=PAD_KV_SEGMENT), mask.q_slot)
    n_q = q.shape[1] // bq
    n_k = k.shape[2] // bk
    dt = q.dtype

    def query_block(q0):
        qi = jax.lax.dynamic_slice_in_dim(q, q0, bq, axis=1)           # [batch, bq, kv, groups, hd]
        last = jax.lax.dynamic_slice_in_dim(mask.q_slot, q0, bq, axis=1).max()
        n_visible = jnp.clip(last // bk + 1, 1, n_k)                    # key blocks any query sees

        def key_block(j, carry):
            m, l, acc = carry
            k0 = j * bk
            kj = jax.lax.dynamic_slice_in_dim(k, k0, bk, axis=2)        # [batch, kv, bk, hd]
            vj = jax.lax.dynamic_slice_in_dim(v, k0, bk, axis=2)
            s = jnp.einsum("btkgd,bksd->bkgts", qi, kj, preferred_element_type=jnp.float32) * hd ** -0.5
            allowed = mask.block(q0, bq, k0, bk)[:, None, None]
            s = jnp.where(allowed, s, _NEG)
            m_new = jnp.maximum(m, s.max(-1))
            p = jnp.where(allowed, jnp.exp(s - m_new[..., None]), 0.0)
            alpha = jnp.exp(m - m_new)
            pv = jnp.einsum("bkgts,bksd->bkgtd", p.astype(dt), vj, preferred_element_type=jnp.float32)
            return m_new, alpha * l + p.sum(-1), alpha[..., None] * acc + pv

        init = (jnp.full((batch, kv, groups, bq), _NEG, jnp.float32),
                jnp.zeros((batch, kv, groups, bq), jnp.float32),
                jnp.zeros((batch, kv, groups, bq, hd), jnp.float32))
        with jax.named_scope(CACHE_KEY_BLOCKS_SCOPE):   # a run-time trip count, named for jaxwrite.aot
            _, l, acc = jax.lax.fori_loop(0, n_visible, key_block, init)
        out = acc / jnp.where(l > 0, l, 1.0)[..., None]                 # [batch, kv, groups, bq, hd]
        return jnp.transpose(out, (0, 3, 1, 2, 4)).astype(dt)

    if n_q == 1:
        out = query_block(0)
    else:
        blocks = jax.lax.map(query_block, jnp.arange(n_q) * bq)         # [n_q, batch, bq, kv, groups, hd]
        out = jnp.moveaxis(blocks, 0, 1).reshape(batch, n_q * bq, kv, groups, hd)
    return out[:, :seq]
