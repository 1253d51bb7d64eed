"""Blockwise online-softmax attention in plain XLA: the portable long-context path.

No array larger than one query block x one key block of scores ever exists:
- `self_attention` (training, a no-cache forward): one `lax.scan` over the lower-triangular (query
  block, key block) pairs only, so a causal pass does the causal half of the work and the compiled
  loop has a static trip count of n (n + 1) / 2 for n blocks. Its backward (custom_vjp) recomputes
  each pair's scores from the saved log-sum-exp, FlashAttention style, in a second scan over the
  same pairs; nothing per pair is stored.
The engine's cache passes run attention_cache.py.

Axes as in jaxwrite.models: q [B, T, K, G, H]; k, v [B, K, S, H] (S = T: a self-attention pass).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from jaxwrite.models.attention_mask import AttentionMask

_NEG = -1e30   # running-max start: finite, so a row with nothing attended yet never makes inf - inf


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
    """q [B, T, K, G, H]; k, v [B, K, T, H]; mask self-causal over the T tokens.
    Returns [B, T, K, G, H] in q's dtype. `unroll` (static) unrolls the pair loops, which
    lets a benchmark read the loop body's compiled FLOPs (see benchmarks/attention_compile.py)."""
    if not mask.self_causal:
        raise ValueError("self_attention needs a self-causal mask")
    seq = q.shape[1]
    b = self_block_size(seq, block)
    padded = mask.pad_to(b)
    pad = padded.seq - seq
    if pad:
        q = jnp.pad(q, [(0, 0), (0, pad), (0, 0), (0, 0), (0, 0)])
        k, v = (jnp.pad(x, [(0, 0), (0, 0), (0, pad), (0, 0)]) for x in (k, v))
    out = _self_attention(q, k, v, padded, b, unroll)
    return out[:, :seq]


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5))
def _self_attention(q, k, v, mask, block, unroll):
    return _self_forward(q, k, v, mask, block, unroll)[0]


def _pairs_xs(seq: int, block: int):
    qi, kj = causal_block_pairs(seq // block)
    return jnp.asarray(qi) * block, jnp.asarray(kj) * block          # [pairs] start offsets


def _scores(qi, kj, mask: AttentionMask, q0, k0, block: int):
    """Masked scaled scores [B, K, G, bq, bk] (f32) and the block mask [B, 1, 1, bq, bk]."""
    s = jnp.einsum("BTKGH,BKSH->BKGTS", qi, kj, preferred_element_type=jnp.float32) * qi.shape[-1] ** -0.5
    allowed = mask.block(q0, block, k0, block)[:, None, None]
    return jnp.where(allowed, s, _NEG), allowed


def _self_forward(q, k, v, mask, block, unroll):
    batch, seq, kv, groups, hd = q.shape
    dt = q.dtype
    m = jnp.full((batch, kv, groups, seq), _NEG, jnp.float32)          # [B, K, G, T] running max per query
    l = jnp.zeros((batch, kv, groups, seq), jnp.float32)               # [B, K, G, T] running denominator
    acc = jnp.zeros((batch, seq, kv, groups, hd), jnp.float32)         # [B, T, K, G, H] running numerator @ v

    def pair(carry, offsets):
        m, l, acc = carry
        q0, k0 = offsets
        qi = jax.lax.dynamic_slice_in_dim(q, q0, block, axis=1)        # [B, bq, K, G, H]
        kj = jax.lax.dynamic_slice_in_dim(k, k0, block, axis=2)        # [B, K, bk, H]
        vj = jax.lax.dynamic_slice_in_dim(v, k0, block, axis=2)
        s, allowed = _scores(qi, kj, mask, q0, k0, block)
        m_old = jax.lax.dynamic_slice_in_dim(m, q0, block, axis=3)
        m_new = jnp.maximum(m_old, s.max(-1))
        p = jnp.where(allowed, jnp.exp(s - m_new[..., None]), 0.0)    # [B, K, G, bq, bk]
        alpha = jnp.exp(m_old - m_new)
        l_blk = alpha * jax.lax.dynamic_slice_in_dim(l, q0, block, axis=3) + p.sum(-1)
        pv = jnp.einsum("BKGTS,BKSH->BTKGH", p.astype(dt), vj, preferred_element_type=jnp.float32)
        a_old = jax.lax.dynamic_slice_in_dim(acc, q0, block, axis=1)
        a_new = jnp.transpose(alpha, (0, 3, 1, 2))[..., None] * a_old + pv
        return (jax.lax.dynamic_update_slice_in_dim(m, m_new, q0, axis=3),
                jax.lax.dynamic_update_slice_in_dim(l, l_blk, q0, axis=3),
                jax.lax.dynamic_update_slice_in_dim(acc, a_new, q0, axis=1)), None

    (m, l, acc), _ = jax.lax.scan(pair, (m, l, acc), _pairs_xs(seq, block), unroll=unroll)
    safe_l = jnp.where(l > 0, l, 1.0)
    out = (acc / jnp.transpose(safe_l, (0, 3, 1, 2))[..., None]).astype(dt)
    lse = jnp.where(l > 0, m + jnp.log(safe_l), 0.0)                   # [B, K, G, T]
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
    delta = jnp.einsum("BTKGH,BTKGH->BKGT", dout.astype(jnp.float32), out.astype(jnp.float32))
    dq = jnp.zeros(q.shape, jnp.float32)
    dk = jnp.zeros(k.shape, jnp.float32)
    dv = jnp.zeros(v.shape, jnp.float32)

    def pair(carry, offsets):
        dq, dk, dv = carry
        q0, k0 = offsets
        qi = jax.lax.dynamic_slice_in_dim(q, q0, block, axis=1)
        kj = jax.lax.dynamic_slice_in_dim(k, k0, block, axis=2)
        vj = jax.lax.dynamic_slice_in_dim(v, k0, block, axis=2)
        doi = jax.lax.dynamic_slice_in_dim(dout, q0, block, axis=1).astype(dt)
        s, allowed = _scores(qi, kj, mask, q0, k0, block)
        lse_i = jax.lax.dynamic_slice_in_dim(lse, q0, block, axis=3)
        p = jnp.where(allowed, jnp.exp(s - lse_i[..., None]), 0.0)    # [B, K, G, bq, bk]
        dv_j = jnp.einsum("BKGTS,BTKGH->BKSH", p.astype(dt), doi, preferred_element_type=jnp.float32)
        dp = jnp.einsum("BTKGH,BKSH->BKGTS", doi, vj, preferred_element_type=jnp.float32)
        ds = (p * (dp - jax.lax.dynamic_slice_in_dim(delta, q0, block, axis=3)[..., None])).astype(dt)
        dq_i = jnp.einsum("BKGTS,BKSH->BTKGH", ds, kj, preferred_element_type=jnp.float32) * scale
        dk_j = jnp.einsum("BKGTS,BTKGH->BKSH", ds, qi, preferred_element_type=jnp.float32) * scale

        def add(x, upd, start, axis):
            return jax.lax.dynamic_update_slice_in_dim(
                x, jax.lax.dynamic_slice_in_dim(x, start, block, axis=axis) + upd, start, axis=axis)
        return (add(dq, dq_i, q0, 1), add(dk, dk_j, k0, 2), add(dv, dv_j, k0, 2)), None

    (dq, dk, dv), _ = jax.lax.scan(pair, (dq, dk, dv), _pairs_xs(seq, block), unroll=unroll)
    return dq.astype(q.dtype), dk.astype(k.dtype), dv.astype(v.dtype), None


_self_attention.defvjp(_self_fwd, _self_bwd)
