"""Pallas token log-probs and entropy: one custom VJP over two kernel families.

  "tpu"  Mosaic kernels that accumulate across a sequential grid axis (_logprob_pallas_tpu.py)
  "gpu"  Triton kernels where each program loops over the reduction axis (_logprob_pallas_gpu.py)

Both share the tile math in _logprob_tiles.py with the chunked XLA path, so the three agree to
rounding. Tokens are zero-padded to a multiple of block_tokens (cheap: [N, D], never [D, V]); padded
rows get zero cotangents and add nothing to dW.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from jaxwrite.common import target_backend
from jaxwrite.kernels import _logprob_pallas_gpu as gpu_kernels
from jaxwrite.kernels import _logprob_pallas_tpu as tpu_kernels
from jaxwrite.kernels import _logprob_tiles as tiles

FAMILIES = {"tpu": tpu_kernels, "gpu": gpu_kernels}


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5, 6, 7, 8))
def _pallas(h, w, token_ids, temperature, bt, bv, interpret, family, entropy_grad):
    return _pallas_fwd(h, w, token_ids, temperature, bt, bv, interpret, family, entropy_grad)[0]


def _pallas_fwd(h, w, token_ids, temperature, bt, bv, interpret, family, entropy_grad):
    n = h.shape[0]
    n_pad = -(-n // bt) * bt
    h_p = tiles.pad_rows(h, n_pad)  # [n_pad, D]
    ids = tiles.pad_rows(token_ids.astype(jnp.int32)[:, None], n_pad)  # [n_pad, 1]
    logp, entropy, lse = FAMILIES[family].forward(h_p, w, ids, temperature, bt, bv, interpret)
    return (logp[:n, 0], entropy[:n, 0]), (h_p, w, ids, entropy, lse)


def _pallas_bwd(temperature, bt, bv, interpret, family, entropy_grad, residuals, cotangents):
    h_p, w, ids, entropy, lse = residuals
    n_pad = h_p.shape[0]
    n = cotangents[0].shape[0]
    g_logp, g_ent = (tiles.pad_rows(g.astype(jnp.float32)[:, None], n_pad) for g in cotangents)
    dh, dw = FAMILIES[family].backward(h_p, w, ids, lse, entropy, g_logp, g_ent, temperature, bt, bv, interpret,
                                       entropy_grad)
    return dh[:n].astype(h_p.dtype), dw.astype(w.dtype), None


_pallas.defvjp(_pallas_fwd, _pallas_bwd)


def default_family(backend: str | None = None) -> str:
    """The kernel family a backend compiles: GPU backends get "gpu", everything else "tpu"."""
    backend = backend or target_backend()
    return "gpu" if backend in ("gpu", "cuda", "rocm") else "tpu"


def pallas_token_logprobs(h: jax.Array, w: jax.Array, token_ids: jax.Array, temperature: float = 1.0,
                          block_tokens: int | None = None, block_vocab: int | None = None,
                          interpret: bool | None = None, family: str | None = None, entropy_grad: bool = True,
                          ) -> tuple[jax.Array, jax.Array]:
    """-> (logp [N], entropy [N]) float32, differentiable w.r.t. h [N, D] and w [D, V].

    interpret=None runs the kernels in Pallas interpret mode on CPU (tests; slow, small shapes only).
    entropy_grad=False: the entropy is a metric; its cotangent is ignored and its term not computed.
    family=None picks the family for the default backend; naming one lets a CPU host lower the
    kernels for another platform (jax.export with platforms=["tpu"] / ["cuda"]).
    """
    backend = target_backend()
    if interpret is None:
        interpret = backend == "cpu"
    family = family or default_family(backend)
    if family not in FAMILIES:
        raise ValueError(f"unknown Pallas kernel family '{family}'; expected one of {sorted(FAMILIES)}")
    kernels = FAMILIES[family]
    bt = block_tokens or kernels.DEFAULT_BLOCK_TOKENS
    bv = block_vocab or kernels.DEFAULT_BLOCK_VOCAB
    if not (block_tokens or block_vocab) and hasattr(kernels, "default_blocks"):
        bt, bv = kernels.default_blocks(h.shape[1], jnp.dtype(h.dtype).itemsize)   # fit on-chip memory
    if not interpret:
        kernels.check_blocks(bt, bv, h.shape[1])
    return _pallas(h, w, token_ids, float(temperature), int(bt), int(bv), bool(interpret), family, bool(entropy_grad))
