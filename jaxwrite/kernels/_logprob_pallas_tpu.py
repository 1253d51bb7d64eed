"""TPU (Mosaic) log-prob kernels: forward, dh and dW over (token, vocab) tile grids.

Each kernel accumulates across the *last* grid axis into an output block whose index does not
depend on that axis, so the block stays resident while the axis sweeps (Mosaic's sequential
"arbitrary" axis). The other axis is "parallel".

  forward  grid (token tiles, vocab tiles): online log-sum-exp statistics per token
  dh       grid (token tiles, vocab tiles): dh[i]     += dlogits(i, j) @ W[:, j]^T
  dW       grid (vocab tiles, token tiles): dW[:, j]  += h[i]^T @ dlogits(i, j)

V need not divide by block_vocab: the last vocab tile is partial and its out-of-range columns are
masked (reads there are unspecified, writes are dropped). Tiles respect TPU layout: block_tokens a
multiple of 16 (bf16 sublane packing) and block_vocab a multiple of 128 lanes. Accumulating across
the grid needs sequential grid execution, which TPUs (and interpret mode) have and GPUs do not; the
GPU family in _logprob_pallas_gpu.py loops inside each program instead.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

from jaxwrite.kernels import _logprob_tiles as tiles
from jaxwrite.parallel import active_mesh_rules

DEFAULT_BLOCK_TOKENS = 256
DEFAULT_BLOCK_VOCAB = 512

# Scoped VMEM the kernels ask Mosaic for, and the working set default blocks must fit (3/4 of it): at
# hidden 3,584 (Qwen2.5-7B) the 256 x 512 blocks need ~28 MB and Mosaic refuses them under its 16 MiB
# default (CompileTimeScopedVmemOom). v4 and older have 16 MiB of VMEM in all (the compiler: "Used
# 18.61M of 16.00M vmem" for Qwen2.5-7B's blocks under a 24 MiB budget), so they get 16 MiB.
VMEM_LIMIT_BYTES = 32 * 2 ** 20
SMALL_VMEM_BYTES = 16 * 2 ** 20
_SMALL_VMEM_KINDS = ("TPU v2", "TPU v3", "TPU v4")


def _device_kind() -> str:
    """device_kind of the chips being compiled for: the active mesh's (an AOT compile for a slice), else
    the default device's."""
    active = active_mesh_rules()
    device = active[0].devices.flat[0] if active is not None else jax.devices()[0]
    return getattr(device, "device_kind", "")


def vmem_limit_bytes() -> int:
    kind = _device_kind()
    small = any(kind == k or kind.startswith(k + " ") for k in _SMALL_VMEM_KINDS)
    return SMALL_VMEM_BYTES if small else VMEM_LIMIT_BYTES


def vmem_bytes(bt: int, bv: int, d: int, itemsize: int) -> int:
    """Working set of the largest of the three kernels: double-buffered h, W and output blocks, the
    float32 accumulator, and a few [bt, bv] float32 tiles."""
    h, w = 2 * bt * d * itemsize, 2 * d * bv * itemsize
    dw = 2 * d * bv * itemsize + 4 * d * bv
    dh = 2 * bt * d * itemsize + 4 * bt * d
    return h + w + max(dw, dh) + 4 * 4 * bt * bv


def default_blocks(d: int, itemsize: int, vmem_limit: int | None = None) -> tuple[int, int]:
    """The default blocks, halved (vocab first, never below one lane / one bf16 sublane tile) until
    their working set fits 3/4 of the scoped VMEM (by default the chip's, vmem_limit_bytes())."""
    budget = (vmem_limit or vmem_limit_bytes()) * 3 // 4
    bt, bv = DEFAULT_BLOCK_TOKENS, DEFAULT_BLOCK_VOCAB
    while vmem_bytes(bt, bv, d, itemsize) > budget and bv > 128:
        bv //= 2
    while vmem_bytes(bt, bv, d, itemsize) > budget and bt > 16:
        bt //= 2
    return bt, bv


def check_blocks(bt: int, bv: int, d: int) -> None:
    del d  # any hidden size: a [bt, D] block spans the whole lane axis
    if bt % 16 or bv % 128:
        raise ValueError(f"TPU tiles need block_tokens % 16 == 0 and block_vocab % 128 == 0; got {bt}, {bv}")


def _compiler_params(interpret: bool):
    if interpret:
        return None
    return pltpu.CompilerParams(dimension_semantics=("parallel", "arbitrary"), vmem_limit_bytes=vmem_limit_bytes())


def _forward_kernel(h_ref, w_ref, y_ref, m_ref, s_ref, t_ref, zy_ref, *, temperature, bv, v):
    j = pl.program_id(1)

    @pl.when(j == 0)
    def _init():
        init = tiles.initial_stats(m_ref.shape[0])
        m_ref[...], s_ref[...], t_ref[...], zy_ref[...] = init

    cols, valid = tiles.vocab_columns(j, bv, v)
    z = tiles.tile_logits(h_ref[...], w_ref[...], temperature)  # [bt, bv]
    stats = tiles.OnlineStats(m_ref[...], s_ref[...], t_ref[...], zy_ref[...])
    stats = tiles.update_stats(stats, z, cols, valid, y_ref[...])
    m_ref[...], s_ref[...], t_ref[...], zy_ref[...] = stats


def _tile_cotangent(h_ref, w_ref, y_ref, lse_ref, ent_ref, gl_ref, ge_ref, j, temperature, bv, v, entropy_grad):
    cols, valid = tiles.vocab_columns(j, bv, v)
    w_tile = jnp.where(valid, w_ref[...], 0)  # zero partial-tile garbage so 0 * NaN cannot leak
    z = tiles.tile_logits(h_ref[...], w_tile, temperature)  # [bt, bv]
    d = tiles.tile_dlogits(z, cols, valid, y_ref[...], lse_ref[...], ent_ref[...], gl_ref[...],
                           ge_ref[...] if entropy_grad else None)
    return d, w_tile


def _dh_kernel(h_ref, w_ref, y_ref, lse_ref, ent_ref, gl_ref, ge_ref, dh_ref, acc_ref, *, temperature, bv, v,
               entropy_grad):
    # acc_ref [bt, D] float32 VMEM scratch; dh_ref is written once, in h's dtype, after the last vocab
    # tile, so no float32 [N, D] buffer ever reaches HBM.
    j = pl.program_id(1)

    @pl.when(j == 0)
    def _init():
        acc_ref[...] = jnp.zeros(acc_ref.shape, acc_ref.dtype)

    d, w_tile = _tile_cotangent(h_ref, w_ref, y_ref, lse_ref, ent_ref, gl_ref, ge_ref, j, temperature, bv, v,
                                entropy_grad)
    acc_ref[...] += tiles.tile_dh(d, w_tile, temperature)

    @pl.when(j == pl.num_programs(1) - 1)
    def _write():
        dh_ref[...] = acc_ref[...].astype(dh_ref.dtype)


def _dw_kernel(h_ref, w_ref, y_ref, lse_ref, ent_ref, gl_ref, ge_ref, dw_ref, acc_ref, *, temperature, bv, v,
               entropy_grad):
    # acc_ref [D, bv] float32 VMEM scratch: dW is accumulated per vocab tile on chip and written once in
    # W's dtype. A float32 [D, V] output would be a second full-size LM-head gradient in HBM (plus
    # its cast), which made this kernel need more temporary memory than the chunked XLA path.
    j, i = pl.program_id(0), pl.program_id(1)

    @pl.when(i == 0)
    def _init():
        acc_ref[...] = jnp.zeros(acc_ref.shape, acc_ref.dtype)

    d, _ = _tile_cotangent(h_ref, w_ref, y_ref, lse_ref, ent_ref, gl_ref, ge_ref, j, temperature, bv, v, entropy_grad)
    acc_ref[...] += tiles.tile_dw(h_ref[...], d, temperature)

    @pl.when(i == pl.num_programs(1) - 1)
    def _write():
        dw_ref[...] = acc_ref[...].astype(dw_ref.dtype)


def _specs(d: int, bt: int, bv: int, vocab_major: bool):
    """BlockSpecs for (h, w, y, and four per-token columns); grid order (i, j) or (j, i)."""
    if vocab_major:
        tok = lambda j, i: (i, 0)  # noqa: E731
        voc = lambda j, i: (0, j)  # noqa: E731
    else:
        tok = lambda i, j: (i, 0)  # noqa: E731
        voc = lambda i, j: (0, j)  # noqa: E731
    column = pl.BlockSpec((bt, 1), tok)
    return pl.BlockSpec((bt, d), tok), pl.BlockSpec((d, bv), voc), column, tok, voc


def forward(h, w, ids, temperature, bt, bv, interpret):
    """h [n_pad, D], w [D, V], ids [n_pad, 1] -> (logp, entropy, lse), each [n_pad, 1] float32."""
    n_pad, d = h.shape
    v = w.shape[1]
    h_spec, w_spec, column, _, _ = _specs(d, bt, bv, vocab_major=False)
    kernel = functools.partial(_forward_kernel, temperature=temperature, bv=bv, v=v)
    stat = jax.ShapeDtypeStruct((n_pad, 1), jnp.float32)
    stats = pl.pallas_call(
        kernel, out_shape=(stat,) * 4, grid=(n_pad // bt, pl.cdiv(v, bv)),
        in_specs=[h_spec, w_spec, column], out_specs=(column,) * 4,
        compiler_params=_compiler_params(interpret), interpret=interpret, name="logprob_forward",
    )(h, w, ids)
    return tiles.finish_stats(tiles.OnlineStats(*stats))


def backward(h, w, ids, lse, entropy, g_logp, g_ent, temperature, bt, bv, interpret, entropy_grad=True):
    """Per-token columns [n_pad, 1] -> (dh [n_pad, D] in h's dtype, dW [D, V] in w's dtype);
    entropy_grad=False leaves the entropy's term out of the logits' cotangent."""
    n_pad, d = h.shape
    v = w.shape[1]
    args = (h, w, ids, lse, entropy, g_logp, g_ent)
    params = _compiler_params(interpret)

    h_spec, w_spec, column, tok, _ = _specs(d, bt, bv, vocab_major=False)
    dh = pl.pallas_call(
        functools.partial(_dh_kernel, temperature=temperature, bv=bv, v=v, entropy_grad=entropy_grad),
        out_shape=jax.ShapeDtypeStruct((n_pad, d), h.dtype), grid=(n_pad // bt, pl.cdiv(v, bv)),
        in_specs=[h_spec, w_spec] + [column] * 5, out_specs=pl.BlockSpec((bt, d), tok),
        scratch_shapes=[pltpu.VMEM((bt, d), jnp.float32)],
        compiler_params=params, interpret=interpret, name="logprob_dh",
    )(*args)

    h_spec, w_spec, column, _, voc = _specs(d, bt, bv, vocab_major=True)
    dw = pl.pallas_call(
        functools.partial(_dw_kernel, temperature=temperature, bv=bv, v=v, entropy_grad=entropy_grad),
        out_shape=jax.ShapeDtypeStruct((d, v), w.dtype), grid=(pl.cdiv(v, bv), n_pad // bt),
        in_specs=[h_spec, w_spec] + [column] * 5, out_specs=pl.BlockSpec((d, bv), voc),
        scratch_shapes=[pltpu.VMEM((d, bv), jnp.float32)],
        compiler_params=params, interpret=interpret, name="logprob_dw",
    )(*args)
    return dh, dw
