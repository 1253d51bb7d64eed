"""The KV cache: keys and values of a stack of layers in the one K/V layout, and how full each row is."""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from jaxwrite.models.config import ModelConfig


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class KVCache:
    """Keys and values of a stack of layers plus the number of filled slots per row.

    k, v are [L, B, K, S, H]: each layer holds [B, K, S, H], the layout every attention path reads
    (heads before slots, so a row's keys of one head are one contiguous [S, H] matrix). Slots
    [0, lengths[b]) of row b are filled; a call's T new tokens go to slots lengths[b] + t, and the
    caller keeps lengths + T <= max_len (the inference engine sizes caches to guarantee it).
    """
    k: jax.Array          # [L, B, K, S, H]
    v: jax.Array          # [L, B, K, S, H]
    lengths: jax.Array    # [B] int32

    @property
    def max_len(self) -> int:
        return self.k.shape[3]

    @classmethod
    def zeros(cls, cfg: ModelConfig, batch: int, max_len: int, dtype=None, layers: int | None = None
              ) -> "KVCache":
        """An empty cache for `layers` layers (default: all of cfg's)."""
        dtype = jnp.dtype(dtype or cfg.dtype)
        shape = (cfg.num_layers if layers is None else layers, batch, cfg.num_kv_heads, max_len, cfg.dim_head)
        return cls(jnp.zeros(shape, dtype), jnp.zeros(shape, dtype), jnp.zeros((batch,), jnp.int32))

    def write(self, layer, k: jax.Array, v: jax.Array) -> "KVCache":
        """Writes a call's new keys / values k, v [B, K, T, H] of layer `layer` (an int or a traced
        index) at each row's slots lengths[b] + t; lengths are unchanged (see `advance`).

        A scatter of the T new slots per row, nothing else: the caller reads the cache as it was before
        the call (attention reads the new keys from k, v themselves), so under jit with the cache
        donated (or carried through a loop) the update happens in place, never on a copy.
        """
        batch, kv_heads, seq, _ = k.shape
        rows = jnp.arange(batch)[:, None, None]                           # [B, 1, 1]
        heads = jnp.arange(kv_heads)[None, :, None]                       # [1, K, 1]
        slots = self.slots(seq)[:, None, :]                               # [B, 1, T]
        # Slots past the end (a finished row's padding) are dropped, never clamped onto a filled slot.
        put = lambda cache, new: cache.at[layer, rows, heads, slots].set(new.astype(cache.dtype),  # noqa: E731
                                                                          mode="drop")
        return KVCache(put(self.k, k), put(self.v, v), self.lengths)

    def slots(self, seq: int) -> jax.Array:
        """Slots (= positions) [B, T] that the next call's T new tokens are written at."""
        return self.lengths[:, None] + jnp.arange(seq)[None, :]

    def advance(self, attention_mask: jax.Array) -> "KVCache":
        """The cache after a call whose valid new tokens are attention_mask [B, T]."""
        return dataclasses.replace(self, lengths=self.lengths + attention_mask.astype(jnp.int32).sum(-1))
