"""Token log-probs and entropy from final hidden states and the LM head, chosen by implementation name.

All implementations share one signature
    fn(h [N, D], w [D, V], token_ids [N], temperature, block_tokens, block_vocab, entropy_grad=True)
        -> (logp [N], entropy [N])
with float32 outputs whatever the input dtype, and gradients w.r.t. h and w (entropy included unless
entropy_grad=False: the losses read the entropy as a metric only, and skip its work in the backward).
"""
from __future__ import annotations

import functools
import math
from typing import Callable

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from jaxwrite.common import Registry, target_backend
from jaxwrite.parallel import active_mesh_rules, gradients_accumulate, logical_to_spec
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
                   entropy_grad: bool = True) -> tuple[jax.Array, jax.Array]:
    """log softmax(h w / temperature)[token_ids] and the entropy of that softmax, each [N] float32.

    h [N, D] final hidden states, w [D, V] LM-head weight, token_ids [N] int. Block sizes tune the
    tiled implementations (None = the implementation's default). entropy_grad=False: the entropy is only
    a metric; no gradient flows from it and the backward leaves its term out of every logit tile.
    """
    if h.ndim != 2 or w.ndim != 2 or h.shape[1] != w.shape[0] or token_ids.shape != h.shape[:1]:
        raise ValueError(f"expected h [N, D], w [D, V], token_ids [N]; got {h.shape}, {w.shape}, {token_ids.shape}")
    fn = LOGPROB_IMPLS.get(resolve_impl(impl))
    call = lambda h, w, ids: fn(h, w, ids, temperature, block_tokens, block_vocab,  # noqa: E731
                                entropy_grad=entropy_grad)
    active = active_mesh_rules()
    mesh = active[0] if active is not None else jax.sharding.get_abstract_mesh()
    if mesh.empty or mesh.size == 1:
        return call(h, w, token_ids)
    # Under a mesh, every device runs the kernel on its own N / devices tokens against the whole LM
    # head, so the SPMD partitioner never sees the kernels' custom calls or loops: it would replicate
    # their operands, i.e. gather every token's hidden state onto every chip. The head enters the
    # shard_map as the parameter is sharded (by the active rules: embed over fsdp, vocab over tensor)
    # and is all-gathered inside, so its gradient leaves through the gather's transpose, a
    # reduce-scatter: dW arrives on its shards, summed over every device's tokens, instead of summed
    # and replicated whole on every chip. Tokens that do not divide the mesh are padded to it with zero
    # rows (their cotangents are zero: nothing reaches dW).
    n = h.shape[0]
    pad = -n % mesh.size
    if pad:
        h, token_ids = jnp.pad(h, ((0, pad), (0, 0))), jnp.pad(token_ids, (0, pad))   # [N + pad, D], [N + pad]
    w_spec = logical_to_spec(HEAD_AXES, w.shape, mesh, active[1]) if active is not None else P(None, None)

    def gathered(h, w_shard, ids):
        return call(h, gather_shards(w_shard, w_spec), ids)

    rows = P(tuple(mesh.axis_names))
    sharded = jax.shard_map(gathered, mesh=mesh, in_specs=(P(tuple(mesh.axis_names), None), w_spec, rows),
                            out_specs=(rows, rows), check_vma=False)
    logp, entropy = sharded(h, w, token_ids)
    return (logp[:n], entropy[:n]) if pad else (logp, entropy)


HEAD_AXES = ("embed", "vocab")   # the LM head [D, V]'s logical axes (models.Transformer.head_weight)


def gather_shards(x: jax.Array, spec: P) -> jax.Array:
    """Inside a shard_map: the whole array from this device's shard of an array sharded as `spec`; its
    gradient is reduce-scattered back onto the shards. A dimension split over several mesh axes (major
    first) is gathered minor axis first. Dimensions are gathered smallest mesh axis first: the partly
    gathered array (and the gradient's partly scattered one) is the shard times the axes gathered so
    far, so the large axis last keeps it small (a [D, V] head over fsdp 16 x tensor 4: 4x the shard,
    not 16x)."""
    per_dim = [[(dim, axis) for axis in reversed((axes,) if isinstance(axes, str) else tuple(axes or ()))]
               for dim, axes in enumerate(spec)]
    per_dim.sort(key=lambda dim_steps: math.prod(jax.lax.axis_size(axis) for _, axis in dim_steps))
    steps = tuple(step for dim_steps in per_dim for step in dim_steps)
    return _gather(x, steps, gradients_accumulate()) if steps else x


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def _gather(x, steps, barrier):
    for dim, axis in steps:
        x = jax.lax.all_gather(x, axis, axis=dim, tiled=True)
    return x


def _gather_fwd(x, steps, barrier):
    return _gather(x, steps, barrier), None


def _gather_bwd(steps, barrier, _, g):
    for dim, axis in reversed(steps):
        g = jax.lax.psum_scatter(g, axis, scatter_dimension=dim, tiled=True)
    # Inside the trainer's microbatch loop the barrier keeps each microbatch's reduce-scatter there:
    # XLA would otherwise move it out (accumulate the full, unreduced [D, V] gradient in float32 across
    # microbatches, then reduce once), which costs a whole float32 LM head per chip. Without a loop it
    # only costs memory (1.66 GiB per chip for writer SFT 8B on v5p-32), so it is left out there.
    return (jax.lax.optimization_barrier(g) if barrier else g,)


_gather.defvjp(_gather_fwd, _gather_bwd)
