"""Tile math shared by the chunked XLA and the Pallas log-prob kernels.

One tile is `block_tokens` hidden states times `block_vocab` LM-head columns. The forward pass folds
tiles left to right into four per-token running statistics (online log-sum-exp):

  m   running max of the logits seen so far
  s   sum_v exp(z_v - m)
  t   sum_v exp(z_v - m) * (z_v - m)      (entropy numerator, kept shifted so it never cancels)
  zy  the logit of the selected token (found in exactly one tile)

From them: lse = m + log s, logp = zy - lse, entropy = log s - t / s.
All per-token arrays are [tokens, 1] so the same code runs inside Pallas blocks.
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

# Finite stand-in for -inf: masked columns then give exp(.) = 0 and 0 * (z - m) = 0, never NaN.
NEG_LARGE = -1e30


class OnlineStats(NamedTuple):
    m: jax.Array   # [tokens, 1]
    s: jax.Array   # [tokens, 1]
    t: jax.Array   # [tokens, 1]
    zy: jax.Array  # [tokens, 1]


def pad_rows(x: jax.Array, rows: int) -> jax.Array:
    """Zero-pads the token axis to `rows` (padded tokens get zero cotangents, so they add nothing)."""
    return jnp.pad(x, [(0, rows - x.shape[0])] + [(0, 0)] * (x.ndim - 1))


def vocab_columns(j, block_vocab: int, vocab: int) -> tuple[jax.Array, jax.Array]:
    """Global ids [1, block_vocab] of vocab tile j and which of them exist (the last tile may be partial)."""
    cols = j * block_vocab + jax.lax.broadcasted_iota(jnp.int32, (1, block_vocab), 1)
    return cols, cols < vocab


def initial_stats(tokens: int) -> OnlineStats:
    shape = (tokens, 1)
    return OnlineStats(jnp.full(shape, NEG_LARGE, jnp.float32), jnp.zeros(shape, jnp.float32),
                       jnp.zeros(shape, jnp.float32), jnp.zeros(shape, jnp.float32))


def tile_logits(h: jax.Array, w: jax.Array, temperature: float) -> jax.Array:
    """[tokens, D] x [D, cols] -> [tokens, cols] in float32 whatever the input dtype."""
    return jnp.dot(h, w, preferred_element_type=jnp.float32) * (1.0 / temperature)


def update_stats(stats: OnlineStats, z: jax.Array, cols: jax.Array, valid: jax.Array,
                 token_ids: jax.Array) -> OnlineStats:
    """Fold one logit tile z [tokens, cols] into the running statistics.

    cols [1, cols] are global vocabulary ids, valid [1, cols] marks real (non-padding, non-repeated)
    columns, token_ids [tokens, 1] the selected ids.
    """
    z = jnp.where(valid, z, NEG_LARGE)
    m_new = jnp.maximum(stats.m, jnp.max(z, axis=1, keepdims=True))
    alpha = jnp.exp(stats.m - m_new)
    shifted = z - m_new
    e = jnp.where(valid, jnp.exp(shifted), 0.0)
    s_new = alpha * stats.s + jnp.sum(e, axis=1, keepdims=True)
    # Re-shift the old numerator to the new max: sum e^{z-m'}(z-m') = a * (t + (m-m') s).
    t_new = alpha * (stats.t + (stats.m - m_new) * stats.s) + jnp.sum(e * shifted, axis=1, keepdims=True)
    picked = jnp.logical_and(cols == token_ids, valid)
    zy_new = stats.zy + jnp.sum(jnp.where(picked, z, 0.0), axis=1, keepdims=True)
    return OnlineStats(m_new, s_new, t_new, zy_new)


def finish_stats(stats: OnlineStats) -> tuple[jax.Array, jax.Array, jax.Array]:
    """-> (logp, entropy, lse), each [tokens, 1]."""
    log_s = jnp.log(stats.s)
    lse = stats.m + log_s
    return stats.zy - lse, log_s - stats.t / stats.s, lse


def tile_dlogits(z: jax.Array, cols: jax.Array, valid: jax.Array, token_ids: jax.Array,
                 lse: jax.Array, entropy: jax.Array | None, g_logp: jax.Array, g_ent: jax.Array | None) -> jax.Array:
    """Cotangent of the (scaled) logits of one tile, [tokens, cols] float32.

    d logp / d z_v = onehot_v - p_v;  d H / d z_v = -p_v (log p_v + H). g_ent None: entropy is only a
    metric (no cotangent), and its term is not computed.
    """
    log_p = jnp.where(valid, z, NEG_LARGE) - lse
    p = jnp.exp(log_p)
    onehot = jnp.logical_and(cols == token_ids, valid).astype(jnp.float32)
    d = g_logp * (onehot - p)
    if g_ent is not None:
        d = d - g_ent * p * (log_p + entropy)
    # where (not multiply): padded Pallas tiles may hold garbage, even NaN, in invalid columns.
    return jnp.where(valid, d, 0.0)


def tile_dh(d: jax.Array, w: jax.Array, temperature: float) -> jax.Array:
    """[tokens, cols] x [D, cols]^T -> [tokens, D] float32."""
    out = jax.lax.dot_general(d.astype(w.dtype), w, (((1,), (1,)), ((), ())),
                              preferred_element_type=jnp.float32)
    return out * (1.0 / temperature)


def tile_dw(h: jax.Array, d: jax.Array, temperature: float) -> jax.Array:
    """[tokens, D]^T x [tokens, cols] -> [D, cols] float32."""
    out = jax.lax.dot_general(h, d.astype(h.dtype), (((0,), (0,)), ((), ())),
                              preferred_element_type=jnp.float32)
    return out * (1.0 / temperature)
