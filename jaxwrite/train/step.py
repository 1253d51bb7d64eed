"""The jitted, sharded train and eval steps, shared by every objective.

State is the NNX split of (model, optimizer); its shardings come from the parameters' logical axes,
so the same step runs on (8,1,1), (1,2,4) or one device. Gradient accumulation scans over
microbatches: the host batch [accum · micro, ...] is reshaped to [accum, micro, ...], gradients are
averaged over the scan, and the optimiser (clipping, AdamW) applies once.
"""
from __future__ import annotations

from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxwrite.parallel import accumulating_gradients, logical_sharding, state_shardings, use_mesh_rules

LossFn = Callable[..., tuple[jax.Array, dict[str, jax.Array]]]


def is_max_metric(name: str) -> bool:
    """Metrics named *_max are maxima (e.g. the largest per-token difference): they combine by max over
    microbatches and logging intervals, every other metric by its mean."""
    return name.endswith("_max")


def batch_shardings(batch: dict[str, np.ndarray], mesh: Mesh, rules, lead_axes: tuple = ()) -> dict:
    """Rows split over the batch mesh axes; every other dimension replicated."""
    def one(x):
        axes = lead_axes + ("batch",) + (None,) * (x.ndim - len(lead_axes) - 1)
        # Shard by the GLOBAL row count: each process holds only its rows, and a local count that does
        # not divide the batch axes would wrongly fall back to replication (different data per host).
        shape = list(x.shape)
        shape[len(lead_axes)] *= jax.process_count()
        return logical_sharding(axes, tuple(shape), mesh, rules)
    return {k: one(v) for k, v in batch.items()}


def to_global(batch: dict[str, np.ndarray], shardings: dict) -> dict[str, jax.Array]:
    """This process's rows -> global arrays laid out on the mesh (single- and multi-host alike)."""
    return {k: jax.make_array_from_process_local_data(shardings[k], v) for k, v in batch.items()}


def split_microbatches(batch: dict[str, np.ndarray], accum: int) -> dict[str, np.ndarray]:
    """[rows, ...] -> [accum, rows / accum, ...] (row r goes to microbatch r // (rows / accum))."""
    if accum == 1:
        return batch
    out = {}
    for k, v in batch.items():
        if v.shape[0] % accum:
            raise ValueError(f"batch of {v.shape[0]} rows is not divisible by grad_accum_steps {accum}")
        out[k] = v.reshape(accum, v.shape[0] // accum, *v.shape[1:])
    return out


class StepFunctions:
    """Compiled train / eval steps for one (model, optimizer, mesh, objective)."""

    def __init__(self, model: nnx.Module, optimizer: nnx.Optimizer, loss_fn: LossFn, mesh: Mesh, rules,
                 grad_accum_steps: int = 1, extra: Any = None):
        self.mesh, self.rules, self.accum = mesh, rules, int(grad_accum_steps)
        self.wrt = optimizer.wrt   # what the step differentiates: what the optimiser updates (all params, or adapters)
        self.graphdef, state = nnx.split((model, optimizer))
        self.state_shardings = state_shardings(state, mesh, rules)
        self._loss_fn = loss_fn
        self._extra = extra
        self._replicated = NamedSharding(mesh, PartitionSpec())
        self._train = None
        self._eval = None

    # --- pure functions ------------------------------------------------------------------------
    def _loss(self, params, rest, graphdef_model, batch, rng):
        model = nnx.merge(graphdef_model, params, rest)
        if self._extra is None:
            return self._loss_fn(model, batch, rng)
        return self._loss_fn(model, batch, rng, extra=self._extra)

    def _train_step(self, state, batch, rng):
        model, optimizer = nnx.merge(self.graphdef, state)
        graphdef_model, params, rest = nnx.split(model, self.wrt, ...)
        grad_fn = jax.value_and_grad(self._loss, has_aux=True)

        if self.accum == 1:
            (_, metrics), grads = grad_fn(params, rest, graphdef_model, batch, rng)
        else:
            def micro(carry, xs):
                grads_sum, metrics_sum = carry
                mb, key = xs
                with accumulating_gradients():   # see jaxwrite/parallel/accumulation.py
                    (_, m), g = grad_fn(params, rest, graphdef_model, mb, key)
                # A metric named *_max is a maximum: the step keeps the largest over microbatches.
                metrics_sum = {k: jnp.maximum(v, m[k]) if is_max_metric(k) else v + m[k]
                               for k, v in metrics_sum.items()}
                return (jax.tree.map(jnp.add, grads_sum, g), metrics_sum), None

            keys = jax.random.split(rng, self.accum)
            first_mb = jax.tree.map(lambda x: x[0], batch)
            metric_shapes = jax.eval_shape(lambda: grad_fn(params, rest, graphdef_model, first_mb, keys[0])[0][1])
            zeros = (jax.tree.map(jnp.zeros_like, params),
                     {k: jnp.full(s.shape, -jnp.inf if is_max_metric(k) else 0, s.dtype)
                      for k, s in metric_shapes.items()})
            (grads, metrics), _ = jax.lax.scan(micro, zeros, (batch, keys))
            grads = jax.tree.map(lambda g: g / self.accum, grads)
            metrics = {k: m if is_max_metric(k) else m / self.accum for k, m in metrics.items()}
        metrics = dict(metrics)
        metrics["grad_norm"] = optax.global_norm(grads)
        optimizer.update(model, grads)
        return nnx.state((model, optimizer)), metrics

    def _eval_step(self, state, batch, rng):
        model, _ = nnx.merge(self.graphdef, state)
        graphdef_model, params, rest = nnx.split(model, self.wrt, ...)
        return self._loss(params, rest, graphdef_model, batch, rng)[1]

    # --- compiled entry points -----------------------------------------------------------------
    def train(self, state, batch: dict[str, np.ndarray], rng: jax.Array):
        """One optimiser step on a host batch; returns (new state, metrics on device)."""
        batch = split_microbatches(batch, self.accum)
        lead = (None,) if self.accum > 1 else ()
        shardings = batch_shardings(batch, self.mesh, self.rules, lead)
        if self._train is None:
            self._train = jax.jit(self._train_step,
                                  in_shardings=(self.state_shardings, shardings, self._replicated),
                                  out_shardings=(self.state_shardings, self._replicated),
                                  donate_argnums=(0,))
        with use_mesh_rules(self.mesh, self.rules):
            return self._train(state, to_global(batch, shardings), rng)

    def evaluate(self, state, batch: dict[str, np.ndarray], rng: jax.Array) -> dict[str, jax.Array]:
        shardings = batch_shardings(batch, self.mesh, self.rules)
        if self._eval is None:
            self._eval = jax.jit(self._eval_step,
                                 in_shardings=(self.state_shardings, shardings, self._replicated),
                                 out_shardings=self._replicated)
        with use_mesh_rules(self.mesh, self.rules):
            return self._eval(state, to_global(batch, shardings), rng)
