"""The model as the engine runs it: split for jitted steps, and how its layers meet the KV cache.

Two layouts, chosen by the engine (`Engine(unroll_layers=)`), both made of the model's one KVCache:
- scanned: one KVCache for all layers, updated by the model's layer scan (`Transformer.apply_layers`);
- unrolled: each layer's weights copied out of the stacked arrays once (`Transformer.layer(i)`) and one
  single-layer KVCache per layer, so every layer reads and updates its own buffers. A layer scan slices
  every layer's weights out of the stacked arrays on every call, which XLA's CPU backend copies: once
  per decode step. Unrolling trades that copy for a second copy of the layer weights in memory.
Either way the cache is a tuple of KVCache (`Caches`) whose k / v are [L, B, K, S, H], so every
per-row operation treats both alike.
"""
from __future__ import annotations

import dataclasses
import functools

import jax
from flax import nnx

from jaxwrite.models import KVCache, ModelConfig
from jaxwrite.models.attention_mask import self_attention_mask

Caches = tuple[KVCache, ...]   # (all layers,) scanned, or one single-layer cache per layer unrolled


@functools.partial(jax.tree_util.register_dataclass, data_fields=["params", "layer_params"],
                   meta_fields=["graphdef", "layer_graphdef"])
@dataclasses.dataclass(frozen=True)
class DecodeModel:
    """A model's graph (static under jit) and parameters, plus each layer's own copy when unrolled."""
    graphdef: nnx.GraphDef
    params: nnx.State
    layer_graphdef: nnx.GraphDef | None = None
    layer_params: tuple[nnx.State, ...] | None = None

    @classmethod
    def of(cls, graphdef: nnx.GraphDef, params: nnx.State, unrolled: bool) -> "DecodeModel":
        if not unrolled:
            return cls(graphdef, params)
        model = nnx.merge(graphdef, params)
        layers = [nnx.split(model.layer(i)) for i in range(model.cfg.num_layers)]
        return cls(graphdef, params, layers[0][0], tuple(state for _, state in layers))

    @property
    def unrolled(self) -> bool:
        return self.layer_params is not None

    def model(self):
        return nnx.merge(self.graphdef, self.params)

    def empty_caches(self, cfg: ModelConfig, batch: int, max_len: int) -> Caches:
        if self.unrolled:
            return tuple(KVCache.zeros(cfg, batch, max_len, layers=1) for _ in range(cfg.num_layers))
        return (KVCache.zeros(cfg, batch, max_len),)

    def hidden_states(self, tokens: jax.Array, attention_mask: jax.Array, caches: Caches
                      ) -> tuple[jax.Array, Caches]:
        """Final-norm hidden states [B, T, D] of tokens [B, T] (right-padded, attention_mask [B, T])
        written after each row's cached tokens; returns the updated caches. Attention reads only the
        key blocks holding filled slots (attention_cache.py), so the cache's size costs no work."""
        model = self.model()
        cache = caches[0]
        mask = self_attention_mask(attention_mask)                               # the new tokens'
        positions = cache.slots(tokens.shape[1])                                 # [B, T]
        x = model.embed_tokens(tokens)
        if not self.unrolled:
            x, cache = model.apply_layers(x, positions, mask, cache)
            caches = (cache,)
        else:
            caches = list(caches)
            for i, params in enumerate(self.layer_params):
                x, caches[i] = nnx.merge(self.layer_graphdef, params)(x, positions, mask, caches[i], 0)
        return model.final_norm(x), tuple(c.advance(attention_mask) for c in caches)

    def logits(self, hidden: jax.Array) -> jax.Array:
        """Logits [B, T, V] (float32) from final-norm hidden states [B, T, D]."""
        return self.model().logits_from_hidden(hidden)


def layer_bytes(model) -> int:
    """Bytes of the stacked layer weights: what the unrolled layout copies once more."""
    return sum(x.nbytes for x in jax.tree.leaves(nnx.state(model.layers)))
