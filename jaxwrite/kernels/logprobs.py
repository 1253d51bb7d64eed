"""Token log-probs and entropy from final hidden states and the LM head, chosen by implementation name.

All implementations share one signature
    fn(h [N, D], w [D, V], token_ids [N], temperature, block_tokens, block_vocab) -> (logp [N], entropy [N])
with float32 outputs whatever the input dtype, and gradients w.r.t. h and w (entropy included).
"""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from jaxwrite.common import Registry, target_backend
from jaxwrite.parallel import active_mesh_rules
from jaxwrite.kernels._compiled_memory import least_memory_on_tpu
from jaxwrite.kernels._logprob_chunked import chunked_token_logprobs
from jaxwrite.kernels._logprob_pallas import pallas_token_logprobs
from jaxwrite.kernels._logprob_reference import reference_token_logprobs
from jaxwrite.kernels import _self_check

LogprobFn = Callable[..., tuple[jax.Array, jax.Array]]

LOGPROB_IMPLS: Registry[LogprobFn] = Registry("log-prob implementation")
LOGPROB_IMPLS.register("reference")(reference_token_logprobs)
LOGPROB_IMPLS.register("chunked")(chunked_token_logprobs)
LOGPROB_IMPLS.register("pallas")(pallas_token_logprobs)


def resolve_impl(name: str = "auto", backend: str | None = None) -> str:
    """'auto' -> on TPU the tiled implementation the TPU compiler measured to need the least temporary
    memory (_compiled_memory.py: the Pallas kernels), 'chunked' elsewhere; other names pass through.
    Running on a TPU, 'auto' keeps the Pallas kernels only once they agree with the chunked path on this
    device kind (checked on first use, cached: _self_check.py), else it warns and uses 'chunked'.

    'pallas' on a GPU runs the Triton family (each program loops over its reduction axis). It lowers
    from this project's CI but has not yet been compiled and timed on a GPU, so 'auto' keeps the
    chunked XLA path there until it has.
    """
    if name == "auto":
        backend = backend or target_backend()
        if backend != "tpu":
            return "chunked"
        chosen = least_memory_on_tpu()
        if chosen == "chunked" or backend != _self_check.running_backend():   # AOT: nothing to run it on
            return chosen
        return _self_check.verified_impl(chosen, LOGPROB_IMPLS.get(chosen), LOGPROB_IMPLS.get("chunked"))
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
    call = lambda h, w, ids: fn(h, w, ids, temperature, block_tokens, block_vocab)  # noqa: E731
    active = active_mesh_rules()
    mesh = active[0] if active is not None else jax.sharding.get_abstract_mesh()
    if mesh.empty or mesh.size == 1:
        return call(h, w, token_ids)
    # Under a mesh, every device runs the kernel on its own N / devices tokens against the whole LM
    # head (gathered once), so the SPMD partitioner never sees the kernels' custom calls or loops: it
    # would replicate their operands, i.e. gather every token's hidden state onto every chip. The
    # gradient of the replicated W is summed over devices by shard_map's transpose. Tokens that do not
    # divide the mesh are padded to it with zero rows (their cotangents are zero: nothing reaches dW).
    n = h.shape[0]
    pad = -n % mesh.size
    if pad:
        h, token_ids = jnp.pad(h, ((0, pad), (0, 0))), jnp.pad(token_ids, (0, pad))   # [N + pad, D], [N + pad]
    rows = P(tuple(mesh.axis_names))
    sharded = jax.shard_map(call, mesh=mesh, in_specs=(P(tuple(mesh.axis_names), None), P(None, None), rows),
                            out_specs=(rows, rows), check_vma=False)
    logp, entropy = sharded(h, w, token_ids)
    return (logp[:n], entropy[:n]) if pad else (logp, entropy)
