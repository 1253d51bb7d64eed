"""Pure-dict views of NNX state for Orbax, target shardings for restore, and the shape check.

Checkpoints hold plain nested dicts of arrays (`nnx.to_pure_dict`), so the on-disk layout does not
depend on NNX Variable classes, and paths read like the model's attributes ("layers.attn.q").
"""
from __future__ import annotations

from typing import Any, Mapping

import jax
import numpy as np
from flax import nnx
from jax.sharding import Mesh

from jaxwrite.common import InputError
from jaxwrite.parallel import DEFAULT_RULES, state_shardings


def to_pure(state: nnx.State) -> dict:
    """Nested dict of arrays from an NNX state (Variables unwrapped)."""
    return nnx.to_pure_dict(state)


def abstract_target(state: nnx.State, mesh: Mesh | None = None, rules=DEFAULT_RULES) -> dict:
    """Pure dict of ShapeDtypeStructs to restore `state` into, laid out on `mesh` by logical axes.

    Without a mesh the arrays land on the first local device (fully replicated single-device layout).
    """
    if mesh is not None:
        shardings = state_shardings(state, mesh, rules)
        sharding_of = lambda var, sh: sh  # noqa: E731
    else:
        device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        shardings = state
        sharding_of = lambda var, sh: device  # noqa: E731
    is_var = lambda x: isinstance(x, nnx.Variable)  # noqa: E731

    def one(var, sh):
        value = var.get_value()
        return jax.ShapeDtypeStruct(value.shape, value.dtype, sharding=sharding_of(var, sh))

    abstract = jax.tree.map(one, state, shardings, is_leaf=is_var)
    return nnx.to_pure_dict(abstract)


def flat_shapes(tree: Mapping) -> dict[str, tuple[int, ...]]:
    """{"layers.attn.q": shape, ...} for a nested dict whose leaves have a `.shape`."""
    out: dict[str, tuple[int, ...]] = {}

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, Mapping):
            for key, child in node.items():
                walk(child, f"{prefix}.{key}" if prefix else str(key))
        elif isinstance(node, (list, tuple)):
            for i, child in enumerate(node):
                walk(child, f"{prefix}.{i}" if prefix else str(i))
        elif node is not None:
            out[prefix] = tuple(int(d) for d in getattr(node, "shape", np.shape(node)))

    walk(tree, "")
    return out


def check_matches(expected: Mapping, found: Mapping, what: str, where: str) -> None:
    """Raises a one-line InputError at the first path whose presence or shape differs."""
    want, have = flat_shapes(expected), flat_shapes(found)
    for path in sorted(want):
        if path not in have:
            raise InputError(f"{what} {path}: expected shape {want[path]}, not present in the checkpoint",
                             path=where)
        if want[path] != have[path]:
            raise InputError(f"{what} {path}: expected shape {want[path]}, found {have[path]}", path=where)
    extra = sorted(set(have) - set(want))
    if extra:
        raise InputError(f"{what} {extra[0]}: present in the checkpoint (shape {have[extra[0]]}) "
                         "but not in the configured model", path=where)
