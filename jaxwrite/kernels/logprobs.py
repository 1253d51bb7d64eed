"""Token log-probs and entropy from final hidden states and the LM head, chosen by implementation name.

All implementations share one signature
    fn(h [N, D], w [D, V], token_ids [N], temperature, block_tokens, block_vocab) -> (logp [N], entropy [N])
with float32 outputs whatever the input dtype, and gradients w.r.t. h and w (entropy included).
"""
from __future__ import annotations

from typing import Callable

import jax

from jaxwrite.common import Registry
from jaxwrite.kernels._logprob_chunked import chunked_token_logprobs
from jaxwrite.kernels._logprob_pallas import pallas_token_logprobs
from jaxwrite.kernels._logprob_reference import reference_token_logprobs

LogprobFn = Callable[..., tuple[jax.Array, jax.Array]]

LOGPROB_IMPLS: Registry[LogprobFn] = Registry("log-prob implementation")
LOGPROB_IMPLS.register("reference")(reference_token_logprobs)
LOGPROB_IMPLS.register("chunked")(chunked_token_logprobs)
LOGPROB_IMPLS.register("pallas")(pallas_token_logprobs)


def resolve_impl(name: str = "auto", backend: str | None = None) -> str:
    """'auto' -> 'pallas' on TPU, 'chunked' elsewhere; other names pass through (checked).

    'pallas' on a GPU runs the Triton family (each program loops over its reduction axis). It lowers
    from this project's CI but has not yet been compiled and timed on a GPU, so 'auto' keeps the
    chunked XLA path there until it has.
    """
    if name == "auto":
        backend = backend or jax.default_backend()
        return "pallas" if backend == "tpu" else "chunked"
    LOGPROB_IMPLS.get(name)
    return name


def token_logprobs(h: jax.Array, w: jax.Array, token_ids: jax.Array, *, temperature: float = 1.0,
                   impl: str = "auto", block_tokens: int | None = None, block_vocab: int | None = None,
                   ) -> tuple[jax.Array, jax.Array]:
    """log softmax(h w / temperature)[token_ids] and the entropy of that softmax, each [N] float32.

    h [N, D] final hidden states, w [D, V] LM-head weight, token_ids [N] int. Block sizes tune the
    tiled implementations (None = the implementation's default).
    """
    if h.ndim != 2 or w.ndim != 2 or h.shape[1] != w.shape[0] or token_ids.shape != h.shape[:1]:
        raise ValueError(f"expected h [N, D], w [D, V], token_ids [N]; got {h.shape}, {w.shape}, {token_ids.shape}")
    fn = LOGPROB_IMPLS.get(resolve_impl(impl))
    return fn(h, w, token_ids, temperature, block_tokens, block_vocab)
