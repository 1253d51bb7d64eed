"""Where an engine without a mesh of its own puts the arrays it makes."""
from __future__ import annotations

import jax
from flax import nnx


def home_sharding(params: nnx.State) -> jax.sharding.Sharding | None:
    """Where the engine puts the arrays it makes (caches, rows, prompt chunks) when it has no mesh of its
    own: on the parameters' one-device mesh when they live on one (the checkpoint loaders place them so).
    A jitted step's outputs take that sharding, and the cache goes round from one call to the next: a cache
    made unplaced would make a prefill's first chunk a different cache key from its later ones, so each
    prefill shape would be traced and compiled twice (~5 s each for SmolLM2-135M on 2 cores; a mesh of
    several devices, where the outputs' sharding is the compiler's choice, keeps that cost)."""
    leaves = jax.tree.leaves(params)
    sharding = getattr(leaves[0], "sharding", None) if leaves else None
    if isinstance(sharding, jax.sharding.NamedSharding) and sharding.mesh.size == 1:
        return jax.sharding.NamedSharding(sharding.mesh, jax.sharding.PartitionSpec())
    return None
