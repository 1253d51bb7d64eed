"""Which keys each query may attend to, described by segment ids and slots instead of a [seq, keys] array.

Every attention implementation reads the same `AttentionMask`: query i attends key j iff

    q_segment[i] == kv_segment[j]  and  j <= q_slot[i]

Segment ids carry packing and padding (a padding key gets a segment no query has), `q_slot` carries
causality (the key slot of the query itself). A dense [B, T, S] boolean would be 1 GB per row at 32k
tokens; this description is O(T + S) and each implementation builds only the blocks it needs
(`block`), or hands the segment ids to a kernel (splash) that does the same. A cache pass describes its
new tokens among themselves with the same self-causal mask; the cache's filled slots are all visible to
them (attention_cache.py).
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

# Segments of positions added to round a sequence up to a block multiple: a padded query matches no
# key (its row is dropped afterwards) and a padded key matches no query.
PAD_Q_SEGMENT = -1
PAD_KV_SEGMENT = -2


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class AttentionMask:
    q_segment: jax.Array       # [B, T] int32
    kv_segment: jax.Array      # [B, S] int32
    q_slot: jax.Array          # [B, T] int32: the query attends keys at slots <= q_slot
    # Static facts implementations may exploit. self_causal: q_slot == arange(seq) and keys == seq (a
    # no-cache causal pass), so every key block above the diagonal is empty and is skipped without
    # looking at the data. packed: rows may hold several segments, not only a valid prefix + padding.
    self_causal: bool = dataclasses.field(default=False, metadata=dict(static=True))
    packed: bool = dataclasses.field(default=False, metadata=dict(static=True))

    @property
    def seq(self) -> int:
        return self.q_segment.shape[1]

    @property
    def keys(self) -> int:
        return self.kv_segment.shape[1]

    def block(self, q0, bq: int, k0, bk: int) -> jax.Array:
        """Mask [B, bq, bk] of queries q0..q0+bq against keys k0..k0+bk (q0, k0 may be traced)."""
        q_seg = jax.lax.dynamic_slice_in_dim(self.q_segment, q0, bq, axis=1)
        q_slot = jax.lax.dynamic_slice_in_dim(self.q_slot, q0, bq, axis=1)
        kv_seg = jax.lax.dynamic_slice_in_dim(self.kv_segment, k0, bk, axis=1)
        kv_slot = k0 + jnp.arange(bk, dtype=jnp.int32)
        return (q_seg[:, :, None] == kv_seg[:, None, :]) & (kv_slot[None, None, :] <= q_slot[:, :, None])

    def dense(self) -> jax.Array:
        """The whole mask [B, T, S]; for short inputs (a cache pass's own tokens) and tests."""
        return self.block(0, self.seq, 0, self.keys)

    def pad_to(self, multiple: int) -> "AttentionMask":
        """A self-causal mask with seq rounded up to `multiple` (padded slots match nothing)."""
        pad = -self.seq % multiple
        if not pad:
            return self
        if not self.self_causal:
            raise ValueError("only a self-attention mask can be padded")
        seq = self.seq + pad
        q_seg = jnp.pad(self.q_segment, ((0, 0), (0, pad)), constant_values=PAD_Q_SEGMENT)
        kv_seg = jnp.pad(self.kv_segment, ((0, 0), (0, pad)), constant_values=PAD_KV_SEGMENT)
        q_slot = jnp.broadcast_to(jnp.arange(seq, dtype=jnp.int32), q_seg.shape)
        return AttentionMask(q_seg, kv_seg, q_slot, self_causal=True, packed=self.packed)


def self_attention_mask(attention_mask: jax.Array, segment_ids: jax.Array | None = None) -> AttentionMask:
    """Causal mask of tokens [B, T] among themselves: attention_mask [B, T] (False = padding),
    segment_ids [B, T] (packed documents, 0 = padding) or None.

    Queries and keys share one segment array, so every row attends at least to itself (no empty
    softmax row, which kernels such as splash require); a padding query sees only padding and its
    output is never read.
    """
    valid = attention_mask.astype(bool)
    seg = jnp.ones_like(valid, jnp.int32) if segment_ids is None else segment_ids.astype(jnp.int32)
    seg = jnp.where(valid, seg, 0)                                                  # [B, T]
    slot = jnp.broadcast_to(jnp.arange(seg.shape[1], dtype=jnp.int32), seg.shape)
    return AttentionMask(seg, seg, slot, self_causal=True, packed=segment_ids is not None)
