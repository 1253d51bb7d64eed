"""Chunked XLA token log-probs and entropy with a hand-written VJP (the CPU path).

Tokens are processed `block_tokens` at a time (lax.map / lax.scan) and the vocabulary `block_vocab`
columns at a time with an online log-sum-exp, so no buffer larger than [block_tokens, block_vocab]
logits is ever live. The backward pass recomputes each logit tile from the saved per-token
log-sum-exp and entropy instead of storing probabilities.

The vocabulary need not divide by `block_vocab`: the last tile starts at V - block_vocab (so every
slice stays in bounds without padding W, which would copy the whole LM head) and masks the columns an
earlier tile already covered.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxwrite.kernels import _logprob_tiles as tiles

DEFAULT_BLOCK_TOKENS = 512
DEFAULT_BLOCK_VOCAB = 16384


def _blocks(n: int, v: int, block_tokens: int | None, block_vocab: int | None) -> tuple[int, int]:
    bt = min(block_tokens or DEFAULT_BLOCK_TOKENS, n)
    bv = min(block_vocab or DEFAULT_BLOCK_VOCAB, v)
    return bt, bv


def _vocab_tile(w: jax.Array, j: jax.Array, bv: int) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Tile j of W: (start, w_tile [D, bv], cols [1, bv], valid [1, bv])."""
    v = w.shape[1]
    start = jnp.minimum(j * bv, v - bv)
    w_tile = jax.lax.dynamic_slice_in_dim(w, start, bv, axis=1)
    cols = start + jax.lax.broadcasted_iota(jnp.int32, (1, bv), 1)
    return start, w_tile, cols, cols >= j * bv


def _split_tokens(x: jax.Array, bt: int) -> jax.Array:
    """[N, ...] -> [ceil(N / bt), bt, ...], zero-padded (padded rows get zero cotangents)."""
    n = x.shape[0]
    n_chunks = -(-n // bt)
    pad = n_chunks * bt - n
    x = jnp.pad(x, [(0, pad)] + [(0, 0)] * (x.ndim - 1))
    return x.reshape((n_chunks, bt) + x.shape[1:])


def _forward(h, w, token_ids, temperature, bt, bv):
    n, v = h.shape[0], w.shape[1]
    n_vocab_tiles = -(-v // bv)

    def one_token_chunk(args):
        h_c, y_c = args  # [bt, D], [bt, 1]

        def fold(j, stats):
            _, w_tile, cols, valid = _vocab_tile(w, j, bv)
            z = tiles.tile_logits(h_c, w_tile, temperature)  # [bt, bv]
            return tiles.update_stats(stats, z, cols, valid, y_c)

        stats = jax.lax.fori_loop(0, n_vocab_tiles, fold, tiles.initial_stats(bt))
        return tiles.finish_stats(stats)

    ids = token_ids.astype(jnp.int32)[:, None]  # [N, 1]
    logp, entropy, lse = jax.lax.map(one_token_chunk, (_split_tokens(h, bt), _split_tokens(ids, bt)))
    flat = lambda x: x.reshape(-1)[:n]  # noqa: E731  [chunks, bt, 1] -> [N]
    return flat(logp), flat(entropy), flat(lse)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def _chunked(h, w, token_ids, temperature, bt, bv):
    logp, entropy, _ = _forward(h, w, token_ids, temperature, bt, bv)
    return logp, entropy


def _chunked_fwd(h, w, token_ids, temperature, bt, bv):
    logp, entropy, lse = _forward(h, w, token_ids, temperature, bt, bv)
    return (logp, entropy), (h, w, token_ids, lse, entropy)


def _chunked_bwd(temperature, bt, bv, residuals, cotangents):
    # Vocabulary tiles outside, token chunks inside: each dW tile [D, bv] is finished in registers of
    # the inner loop and written once, instead of read-modify-writing the [D, V] gradient per chunk.
    h, w, token_ids, lse, entropy = residuals
    g_logp, g_ent = cotangents
    n, d_model = h.shape
    n_vocab_tiles = -(-w.shape[1] // bv)
    n_chunks = -(-n // bt)
    rows = n_chunks * bt
    pad = lambda x: jnp.pad(x, [(0, rows - n)] + [(0, 0)] * (x.ndim - 1))  # noqa: E731
    col = lambda x: pad(x.astype(jnp.float32)[:, None])  # noqa: E731  [rows, 1]
    h_p, ids = pad(h), pad(token_ids.astype(jnp.int32)[:, None])
    lse_p, ent_p, gl_p, ge_p = col(lse), col(entropy), col(g_logp), col(g_ent)

    def one_vocab_tile(j, carry):
        dh, dw = carry
        start, w_tile, cols, valid = _vocab_tile(w, j, bv)

        def one_token_chunk(i, inner):
            dh, dw_tile = inner
            take = lambda x: jax.lax.dynamic_slice_in_dim(x, i * bt, bt, axis=0)  # noqa: E731
            h_c = take(h_p)  # [bt, D]
            z = tiles.tile_logits(h_c, w_tile, temperature)  # [bt, bv]
            d = tiles.tile_dlogits(z, cols, valid, take(ids), take(lse_p), take(ent_p), take(gl_p), take(ge_p))
            dh_c = take(dh) + tiles.tile_dh(d, w_tile, temperature)
            dh = jax.lax.dynamic_update_slice_in_dim(dh, dh_c, i * bt, axis=0)
            return dh, dw_tile + tiles.tile_dw(h_c, d, temperature)

        dw_tile = jnp.zeros((d_model, bv), jnp.float32)  # [D, bv]
        dh, dw_tile = jax.lax.fori_loop(0, n_chunks, one_token_chunk, (dh, dw_tile))
        # Add, not overwrite: the last tile overlaps its predecessor (its overlap columns hold zeros).
        dw_tile = jax.lax.dynamic_slice_in_dim(dw, start, bv, axis=1) + dw_tile
        return dh, jax.lax.dynamic_update_slice_in_dim(dw, dw_tile, start, axis=1)

    dh0 = jnp.zeros((rows, d_model), jnp.float32)  # [rows, D]
    dw0 = jnp.zeros(w.shape, jnp.float32)  # [D, V]
    dh, dw = jax.lax.fori_loop(0, n_vocab_tiles, one_vocab_tile, (dh0, dw0))
    return dh[:n].astype(h.dtype), dw.astype(w.dtype), None


_chunked.defvjp(_chunked_fwd, _chunked_bwd)


def chunked_token_logprobs(h: jax.Array, w: jax.Array, token_ids: jax.Array, temperature: float = 1.0,
                           block_tokens: int | None = None, block_vocab: int | None = None,
                           ) -> tuple[jax.Array, jax.Array]:
    """-> (logp [N], entropy [N]) float32, differentiable w.r.t. h [N, D] and w [D, V]."""
    bt, bv = _blocks(h.shape[0], w.shape[1], block_tokens, block_vocab)
    return _chunked(h, w, token_ids, float(temperature), bt, bv)
