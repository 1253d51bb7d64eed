"""GPU (Triton) log-prob kernels: forward, dh and dW, each program owning its output block.

GPU grids run their programs in parallel, so nothing may accumulate across grid steps (the TPU
family does). Here every program loops over the reduction axis itself with `fori_loop`:

  forward  grid (token tiles,):  loop over vocab tiles, online log-sum-exp statistics per token
  dh       grid (token tiles,):  loop over vocab tiles, dh[i]    += dlogits(i, j) @ W[:, j]^T
  dW       grid (vocab tiles,):  loop over token tiles, dW[:, j] += h[i]^T @ dlogits(i, j)

Triton loads and stores power-of-two shapes only, and Qwen hidden sizes are not powers of two
(896 = 7 x 128), so the hidden axis is walked in `block_d` chunks (the largest power of two up to
128 dividing D) with one [rows, block_d] accumulator per chunk; loops over D are unrolled in Python.
The last vocab tile is read and written with masks, so V need not divide by block_vocab and W is
never padded (a padded copy would duplicate the whole LM head).

dlogits is recomputed from the saved per-token log-sum-exp and entropy in both backward kernels, as
in the TPU family, so memory stays O(tokens + tile).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as pltriton

from jaxwrite.kernels import _logprob_tiles as tiles

DEFAULT_BLOCK_TOKENS = 16
DEFAULT_BLOCK_VOCAB = 128
# dW keeps D x block_vocab float32 accumulators per program; 32 columns keep a 896-wide head at
# ~112 registers per thread with 8 warps.
DW_BLOCK_VOCAB = 32
NUM_WARPS = 8


def block_d(d: int) -> int:
    """Largest power of two <= 128 dividing D (Triton dots need >= 16)."""
    chunk = 128
    while chunk >= 16 and d % chunk:
        chunk //= 2
    if chunk < 16:
        raise ValueError(f"the GPU log-prob kernels need a hidden size divisible by 16; got {d}")
    return chunk


def _is_pow2(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0


def check_blocks(bt: int, bv: int, d: int) -> None:
    if not (_is_pow2(bt) and _is_pow2(bv) and bt >= 16 and bv >= 16):
        raise ValueError(f"GPU tiles need power-of-two block_tokens and block_vocab >= 16; got {bt}, {bv}")
    block_d(d)


def _compiler_params(interpret: bool):
    return None if interpret else pltriton.CompilerParams(num_warps=NUM_WARPS, num_stages=2)


def _precision(dtype):
    # float32 inputs: exact float32 products (Triton would otherwise use TF32), matching the reference.
    return jax.lax.Precision.HIGHEST if dtype == jnp.float32 else None


def _load_w(w_ref, j, bv: int, dk: int, valid, masked: bool) -> list[jax.Array]:
    """Vocab tile j of W as D / dk chunks, each [dk, bv]; masked columns read as 0."""
    chunks = []
    for k in range(w_ref.shape[0] // dk):
        view = w_ref.at[pl.ds(k * dk, dk), pl.ds(j * bv, bv)]
        if masked:
            chunks.append(pltriton.load(view, mask=jnp.broadcast_to(valid, (dk, bv)), other=0))
        else:
            chunks.append(view[...])
    return chunks


def _load_h(h_ref, rows, dk: int) -> list[jax.Array]:
    """Rows of h as D / dk chunks, each [rows, dk]."""
    return [h_ref[rows, pl.ds(k * dk, dk)] for k in range(h_ref.shape[1] // dk)]


def _logits(hs, ws, temperature) -> jax.Array:
    """sum_k h_k @ w_k -> [rows, bv] float32, scaled by 1 / temperature."""
    prec = _precision(hs[0].dtype)
    z = sum(jnp.dot(hk, wk, precision=prec, preferred_element_type=jnp.float32) for hk, wk in zip(hs, ws))
    return z * (1.0 / temperature)


def _forward_kernel(h_ref, w_ref, y_ref, logp_ref, ent_ref, lse_ref, *, temperature, bv, v, dk, masked):
    y = y_ref[...]  # [bt, 1]

    def vocab_step(j, stats):
        cols, valid = tiles.vocab_columns(j, bv, v)
        # h is re-read per tile (from cache): holding [bt, D] in registers would spill.
        z = _logits(_load_h(h_ref, slice(None), dk), _load_w(w_ref, j, bv, dk, valid, masked), temperature)
        return tiles.update_stats(stats, z, cols, valid, y)

    stats = jax.lax.fori_loop(0, pl.cdiv(v, bv), vocab_step, tiles.initial_stats(y.shape[0]))
    logp_ref[...], ent_ref[...], lse_ref[...] = tiles.finish_stats(stats)


def _dlogits(z, cols, valid, cols_refs, rows, entropy_grad):
    y, lse, ent, g_logp, g_ent = (ref[rows, :] for ref in cols_refs)  # each [bt, 1]
    return tiles.tile_dlogits(z, cols, valid, y, lse, ent, g_logp, g_ent if entropy_grad else None)


def _dh_kernel(h_ref, w_ref, *refs, temperature, bv, v, dk, masked, entropy_grad):
    *cols_refs, dh_ref = refs
    n_chunks = h_ref.shape[1] // dk
    bt = h_ref.shape[0]
    prec = _precision(h_ref.dtype)

    def vocab_step(j, accs):
        cols, valid = tiles.vocab_columns(j, bv, v)
        ws = _load_w(w_ref, j, bv, dk, valid, masked)
        z = _logits(_load_h(h_ref, slice(None), dk), ws, temperature)
        d = _dlogits(z, cols, valid, cols_refs, slice(None), entropy_grad).astype(w_ref.dtype)  # [bt, bv]
        return tuple(acc + jax.lax.dot_general(d, wk, (((1,), (1,)), ((), ())), precision=prec,
                                               preferred_element_type=jnp.float32)
                     for acc, wk in zip(accs, ws))

    zeros = tuple(jnp.zeros((bt, dk), jnp.float32) for _ in range(n_chunks))
    accs = jax.lax.fori_loop(0, pl.cdiv(v, bv), vocab_step, zeros)
    for k, acc in enumerate(accs):
        dh_ref[:, pl.ds(k * dk, dk)] = acc * (1.0 / temperature)


def _dw_kernel(h_ref, w_ref, *refs, temperature, bt, bv, v, dk, masked, entropy_grad):
    *cols_refs, dw_ref = refs
    j = pl.program_id(0)
    n_chunks = h_ref.shape[1] // dk
    prec = _precision(h_ref.dtype)
    cols, valid = tiles.vocab_columns(j, bv, v)

    def token_step(i, accs):
        rows = pl.ds(i * bt, bt)
        hs = _load_h(h_ref, rows, dk)
        z = _logits(hs, _load_w(w_ref, j, bv, dk, valid, masked), temperature)
        d = _dlogits(z, cols, valid, cols_refs, rows, entropy_grad).astype(h_ref.dtype)  # [bt, bv]
        return tuple(acc + jax.lax.dot_general(hk, d, (((0,), (0,)), ((), ())), precision=prec,
                                               preferred_element_type=jnp.float32)
                     for acc, hk in zip(accs, hs))

    zeros = tuple(jnp.zeros((dk, bv), jnp.float32) for _ in range(n_chunks))
    accs = jax.lax.fori_loop(0, h_ref.shape[0] // bt, token_step, zeros)
    for k, acc in enumerate(accs):
        view = dw_ref.at[pl.ds(k * dk, dk), pl.ds(j * bv, bv)]
        acc = acc * (1.0 / temperature)
        if masked:
            pltriton.store(view, acc, mask=jnp.broadcast_to(valid, (dk, bv)))
        else:
            view[...] = acc


def forward(h, w, ids, temperature, bt, bv, interpret):
    """h [n_pad, D], w [D, V], ids [n_pad, 1] -> (logp, entropy, lse), each [n_pad, 1] float32."""
    n_pad, d = h.shape
    v = w.shape[1]
    tok = lambda i: (i, 0)  # noqa: E731
    column = pl.BlockSpec((bt, 1), tok)
    kernel = functools.partial(_forward_kernel, temperature=temperature, bv=bv, v=v, dk=block_d(d),
                               masked=v % bv != 0)
    stat = jax.ShapeDtypeStruct((n_pad, 1), jnp.float32)
    return pl.pallas_call(
        kernel, out_shape=(stat,) * 3, grid=(n_pad // bt,),
        in_specs=[pl.BlockSpec((bt, d), tok), pl.BlockSpec(), column], out_specs=(column,) * 3,
        compiler_params=_compiler_params(interpret), interpret=interpret, name="logprob_forward_gpu",
    )(h, w, ids)


def backward(h, w, ids, lse, entropy, g_logp, g_ent, temperature, bt, bv, interpret, entropy_grad=True):
    """Per-token columns [n_pad, 1] -> (dh [n_pad, D], dW [D, V]) float32; entropy_grad=False leaves the
    entropy's term out of the logits' cotangent."""
    n_pad, d = h.shape
    v = w.shape[1]
    dk = block_d(d)
    columns = (ids, lse, entropy, g_logp, g_ent)
    params = _compiler_params(interpret)

    tok = lambda i: (i, 0)  # noqa: E731
    dh = pl.pallas_call(
        functools.partial(_dh_kernel, temperature=temperature, bv=bv, v=v, dk=dk, masked=v % bv != 0,
                          entropy_grad=entropy_grad),
        out_shape=jax.ShapeDtypeStruct((n_pad, d), jnp.float32), grid=(n_pad // bt,),
        in_specs=[pl.BlockSpec((bt, d), tok), pl.BlockSpec()] + [pl.BlockSpec((bt, 1), tok)] * 5,
        out_specs=pl.BlockSpec((bt, d), tok),
        compiler_params=params, interpret=interpret, name="logprob_dh_gpu",
    )(h, w, *columns)

    bv_dw = min(bv, DW_BLOCK_VOCAB)
    dw = pl.pallas_call(
        functools.partial(_dw_kernel, temperature=temperature, bt=bt, bv=bv_dw, v=v, dk=dk,
                          masked=v % bv_dw != 0, entropy_grad=entropy_grad),
        out_shape=jax.ShapeDtypeStruct((d, v), jnp.float32), grid=(pl.cdiv(v, bv_dw),),
        in_specs=[pl.BlockSpec()] * 7, out_specs=pl.BlockSpec(),
        compiler_params=params, interpret=interpret, name="logprob_dw_gpu",
    )(h, w, *columns)
    return dh, dw
