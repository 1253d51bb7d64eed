"""Logical axis names -> mesh axes: one small rules table, applied to parameters and activations.

Parameters carry `axes=(...)` metadata (see jaxwrite.models); activations are annotated with
`constrain(x, axes)`, which is a no-op unless a mesh and rules are active (`use_mesh_rules`).
A mesh axis that does not divide a dimension is dropped for that dimension, so any device count works
(e.g. 2 KV heads on a tensor axis of 4 stay replicated instead of failing).
"""
from __future__ import annotations

import contextlib
import contextvars
import math
from typing import Iterator, Sequence

import jax
from flax import nnx
from jax.sharding import Mesh, NamedSharding, PartitionSpec

Rules = tuple[tuple[str, object], ...]

# Default rules: data parallel over (data, fsdp) for the batch, ZeRO-3 style parameter sharding over
# fsdp on the embedding dimension, Megatron-style tensor parallelism over heads / mlp / vocab.
# cache_batch: the rows of the inference engine's KV cache and of the attention that reads it.
DEFAULT_RULES: Rules = (
    ("batch", ("data", "fsdp")),
    ("cache_batch", ("data", "fsdp")),
    ("seq", None),
    ("act_embed", None),
    ("act_heads", "tensor"),
    ("act_mlp", "tensor"),
    ("act_vocab", "tensor"),
    ("cache_seq", None),
    ("vocab", "tensor"),
    ("embed", "fsdp"),
    ("heads", "tensor"),
    ("kv_heads", "tensor"),
    ("head_dim", None),
    ("mlp", "tensor"),
    ("norm", None),
    ("layers", None),
)

# The engine's decode steps: weight-stationary. A decode step has a few rows, so all-gathering the
# fsdp-sharded weights (what the batch-over-fsdp default does) would move the whole model into every
# chip each step; with activations replicated over fsdp, each chip multiplies by its own weight shard
# and only [rows, width] partial sums travel. The cache and its attention stay row-sharded (cache_batch).
_DECODE_CHANGES = {"batch": "data", "act_embed": "fsdp", "act_mlp": ("tensor", "fsdp")}
DECODE_RULES: Rules = tuple((name, _DECODE_CHANGES.get(name, axes)) for name, axes in DEFAULT_RULES)

_ACTIVE: contextvars.ContextVar[tuple[Mesh, Rules] | None] = contextvars.ContextVar("jaxwrite_mesh_rules",
                                                                                     default=None)


def _mesh_axes_for(name: str | None, rules: Rules) -> tuple[str, ...]:
    if name is None:
        return ()
    for logical, mesh_axes in rules:
        if logical == name:
            if mesh_axes is None:
                return ()
            return (mesh_axes,) if isinstance(mesh_axes, str) else tuple(mesh_axes)
    raise KeyError(f"logical axis '{name}' has no rule; add it to the rules table")


def logical_to_spec(axes: Sequence[str | None], shape: Sequence[int], mesh: Mesh,
                    rules: Rules = DEFAULT_RULES) -> PartitionSpec:
    """PartitionSpec for an array with logical `axes`, keeping only mesh axes that divide each dim."""
    if len(axes) != len(shape):
        raise ValueError(f"axes {tuple(axes)} do not match shape {tuple(shape)}")
    used: set[str] = set()
    spec = []
    for name, dim in zip(axes, shape):
        chosen = []
        for mesh_axis in _mesh_axes_for(name, rules):
            size = mesh.shape[mesh_axis]
            if mesh_axis in used or size == 1:
                continue
            if dim % (math.prod(mesh.shape[a] for a in chosen) * size) == 0:
                chosen.append(mesh_axis)
        used.update(chosen)
        spec.append(None if not chosen else chosen[0] if len(chosen) == 1 else tuple(chosen))
    return PartitionSpec(*spec)


def logical_sharding(axes, shape, mesh: Mesh, rules: Rules = DEFAULT_RULES) -> NamedSharding:
    return NamedSharding(mesh, logical_to_spec(axes, shape, mesh, rules))


def variable_axes(var: nnx.Variable) -> tuple[str | None, ...]:
    """Logical axes of a parameter; stacked layers (scanned) get a leading 'layers' axis."""
    axes = tuple(var.get_metadata().get("axes", ()))
    ndim = len(var.get_value().shape)
    if ndim == len(axes) + 1:
        axes = ("layers",) + axes
    if ndim != len(axes):
        axes = (None,) * ndim
    return axes


def state_shardings(state: nnx.State, mesh: Mesh, rules: Rules = DEFAULT_RULES):
    """NamedShardings for every variable of an (abstract or concrete) NNX state, same tree structure."""
    def one(var):
        return logical_sharding(variable_axes(var), var.get_value().shape, mesh, rules)
    return jax.tree.map(one, state, is_leaf=lambda x: isinstance(x, nnx.Variable))


def shard_model(model: nnx.Module, mesh: Mesh, rules: Rules = DEFAULT_RULES) -> nnx.Module:
    """Places every parameter of `model` on the mesh according to its logical axes (in place)."""
    state = nnx.state(model)
    shardings = state_shardings(state, mesh, rules)
    values = jax.tree.map(lambda v: v.get_value(), state, is_leaf=lambda x: isinstance(x, nnx.Variable))
    placed = jax.device_put(values, jax.tree.map(lambda s: s, shardings,
                                                 is_leaf=lambda x: isinstance(x, nnx.Variable)))
    nnx.update(model, placed)
    return model


@contextlib.contextmanager
def use_mesh_rules(mesh: Mesh, rules: Rules = DEFAULT_RULES) -> Iterator[None]:
    """Activates `mesh` (jax.set_mesh) and the rules used by `constrain` inside this block."""
    token = _ACTIVE.set((mesh, rules))
    try:
        with jax.set_mesh(mesh):
            yield
    finally:
        _ACTIVE.reset(token)


@contextlib.contextmanager
def use_rules_only(mesh: Mesh, rules: Rules = DEFAULT_RULES) -> Iterator[None]:
    """The rules for `constrain` (and the mesh for code that asks active_mesh_rules) without making
    `mesh` JAX's context mesh: an ahead-of-time compile on libtpu's compile-only devices, where
    constants built at trace time (e.g. splash attention's mask tables) must stay on the host."""
    token = _ACTIVE.set((mesh, rules))
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def active_mesh_rules() -> tuple[Mesh, Rules] | None:
    return _ACTIVE.get()


def constrain(x: jax.Array, axes: Sequence[str | None]) -> jax.Array:
    """Sharding constraint on an activation by logical axes; identity without an active mesh."""
    active = _ACTIVE.get()
    if active is None:
        return x
    mesh, rules = active
    return jax.lax.with_sharding_constraint(x, logical_sharding(axes, x.shape, mesh, rules))
