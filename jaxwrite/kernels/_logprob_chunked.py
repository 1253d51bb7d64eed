"""Chunked XLA token log-probs and entropy with a hand-written VJP (the CPU path).

Both passes loop over vocabulary tiles of `block_vocab` columns (outside) and token chunks of
`block_tokens` rows (inside), with an online log-sum-exp across vocabulary tiles, so no logit buffer
larger than [block_tokens, block_vocab] is ever live. The backward pass recomputes each logit tile
from the saved per-token log-sum-exp and entropy instead of storing probabilities.

The vocabulary need not divide by `block_vocab`: the last tile starts at V - block_vocab (so every
slice stays in bounds without padding W, which would copy the whole LM head) and masks the columns an
earlier tile already covered.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxwrite.kernels import _logprob_tiles as tiles

# Tuned on a 2-core CPU at hidden 896 / vocab 151,936: [D, block_vocab] W and dW tiles dominate the
# temporaries, so keep block_vocab modest and block_tokens large enough for efficient matmuls.
DEFAULT_BLOCK_TOKENS = 512
DEFAULT_BLOCK_VOCAB = 4096


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


def _forward(h, w, token_ids, temperature, bt, bv):
    # Vocabulary tiles outside, token chunks inside, so each W tile is sliced once per pass; the
    # carried state is only four [rows, 1] statistics.
    n = h.shape[0]
    n_vocab_tiles = -(-w.shape[1] // bv)
    n_chunks = -(-n // bt)
    rows = n_chunks * bt
    h_p = tiles.pad_rows(h, rows)  # [rows, D]
    ids = tiles.pad_rows(token_ids.astype(jnp.int32)[:, None], rows)  # [rows, 1]

    def one_vocab_tile(j, stats):
        _, w_tile, cols, valid = _vocab_tile(w, j, bv)

        def one_token_chunk(i, stats):
            take = lambda x: jax.lax.dynamic_slice_in_dim(x, i * bt, bt, axis=0)  # noqa: E731
            z = tiles.tile_logits(take(h_p), w_tile, temperature)  # [bt, bv]
            chunk = tiles.update_stats(tiles.OnlineStats(*map(take, stats)), z, cols, valid, take(ids))
            return tiles.OnlineStats(*(jax.lax.dynamic_update_slice_in_dim(full, part, i * bt, axis=0)
                                       for full, part in zip(stats, chunk)))

        return jax.lax.fori_loop(0, n_chunks, one_token_chunk, stats)

    stats = jax.lax.fori_loop(0, n_vocab_tiles, one_vocab_tile, tiles.initial_stats(rows))
    logp, entropy, lse = tiles.finish_stats(stats)  # [rows, 1] each
    return logp[:n, 0], entropy[:n, 0], lse[:n, 0]


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5, 6))
def _chunked(h, w, token_ids, temperature, bt, bv, entropy_grad):
    logp, entropy, _ = _forward(h, w, token_ids, temperature, bt, bv)
    return logp, entropy


def _chunked_fwd(h, w, token_ids, temperature, bt, bv, entropy_grad):
    logp, entropy, lse = _forward(h, w, token_ids, temperature, bt, bv)
    return (logp, entropy), (h, w, token_ids, lse, entropy)


def _chunked_bwd(temperature, bt, bv, entropy_grad, residuals, cotangents):
    # Same loop order as the forward: each dW tile [D, bv] is finished by the inner loop and written
    # once, instead of read-modify-writing the [D, V] gradient once per token chunk.
    h, w, token_ids, lse, entropy = residuals
    g_logp, g_ent = cotangents
    n, d_model = h.shape
    n_vocab_tiles = -(-w.shape[1] // bv)
    n_chunks = -(-n // bt)
    rows = n_chunks * bt
    col = lambda x: tiles.pad_rows(x.astype(jnp.float32)[:, None], rows)  # noqa: E731  [rows, 1]
    h_p, ids = tiles.pad_rows(h, rows), tiles.pad_rows(token_ids.astype(jnp.int32)[:, None], rows)
    lse_p, ent_p, gl_p, ge_p = col(lse), col(entropy), col(g_logp), col(g_ent)

    def one_vocab_tile(j, carry):
        dh, dw = carry
        start, w_tile, cols, valid = _vocab_tile(w, j, bv)

        def one_token_chunk(i, inner):
            dh, dw_tile = inner
            take = lambda x: jax.lax.dynamic_slice_in_dim(x, i * bt, bt, axis=0)  # noqa: E731
            h_c = take(h_p)  # [bt, D]
            z = tiles.tile_logits(h_c, w_tile, temperature)  # [bt, bv]
            d = tiles.tile_dlogits(z, cols, valid, take(ids), take(lse_p), take(ent_p), take(gl_p),
                                   take(ge_p) if entropy_grad else None)
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
                           entropy_grad: bool = True) -> tuple[jax.Array, jax.Array]:
    """-> (logp [N], entropy [N]) float32, differentiable w.r.t. h [N, D] and w [D, V] (through the
    entropy too unless entropy_grad=False: then its cotangent is ignored and its term not computed)."""
    bt, bv = _blocks(h.shape[0], w.shape[1], block_tokens, block_vocab)
    return _chunked(h, w, token_ids, float(temperature), bt, bv, bool(entropy_grad))
