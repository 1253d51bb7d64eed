"""The one decoder-only Transformer (Qwen2/2.5, Qwen3, Llama-3 by config) and its scalar-head variant."""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx

from jaxwrite.models.attention import (Attention, KVCache, build_cache_mask, build_mask,
                                       default_positions)
from jaxwrite.models.config import ModelConfig
from jaxwrite.models.layers import MLP, RMSNorm, param, rope_inv_freq
from jaxwrite.parallel import constrain

_ACT = ("batch", "seq", "act_embed")


class Block(nnx.Module):
    """Pre-norm residual block: x + attn(norm(x)), then + mlp(norm(x))."""

    def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs):
        pd = jnp.dtype(cfg.param_dtype)
        self.attn_norm = RMSNorm(cfg.d_model, cfg.rms_eps, pd, rngs)
        self.attn = Attention(cfg, rngs)
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.rms_eps, pd, rngs)
        self.mlp = MLP(cfg, rngs)

    def __call__(self, x, positions, mask, inv_freq, cache=None):
        h, new_cache = self.attn(self.attn_norm(x), positions, mask, inv_freq, cache)
        x = constrain(x + h, _ACT)
        x = constrain(x + self.mlp(self.mlp_norm(x)), _ACT)
        return x, new_cache


class Transformer(nnx.Module):
    """Token ids [batch, seq] -> logits [batch, seq, vocab] (float32).

    Layers are stacked on a leading axis and run with `lax.scan`, so compile time does not grow with depth.
    Call with `cache=KVCache` for decoding: returns (logits, new_cache).
    """

    def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs, lm_head: bool = True):
        pd = jnp.dtype(cfg.param_dtype)
        self.cfg = cfg
        # std 0.02 as in the reference initialisers: with tied embeddings it keeps initial logits near
        # uniform (loss ≈ ln(vocab)); a unit-variance table would give logits of std sqrt(d_model).
        self.embed = param(rngs, (cfg.vocab_size, cfg.d_model), ("vocab", "embed"), pd, 0.02)

        @nnx.split_rngs(splits=cfg.num_layers)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def make_layers(rngs: nnx.Rngs) -> Block:
            return Block(cfg, rngs)

        self.layers = make_layers(rngs)
        self.final_norm = RMSNorm(cfg.d_model, cfg.rms_eps, pd, rngs)
        self.has_lm_head = lm_head
        if lm_head and not cfg.tie_embeddings:
            self.lm_head = param(rngs, (cfg.d_model, cfg.vocab_size), ("embed", "vocab"), pd,
                                 cfg.d_model ** -0.5)

    # --- pieces other code uses directly (fused GRPO loss, reward head) -----------------------
    def head_weight(self) -> jax.Array:
        """LM-head weight [d_model, vocab] (the transposed embedding when tied)."""
        if self.cfg.tie_embeddings:
            return self.embed.get_value().T
        return self.lm_head.get_value()

    def logits_from_hidden(self, hidden: jax.Array) -> jax.Array:
        dt = jnp.dtype(self.cfg.dtype)
        logits = jnp.einsum("btd,dv->btv", hidden.astype(dt), self.head_weight().astype(dt),
                            preferred_element_type=jnp.float32)
        return constrain(logits, ("batch", "seq", "act_vocab"))          # [batch, seq, vocab]

    def split_layers(self) -> tuple[nnx.State, ...]:
        """Each layer's parameters as its own arrays (a copy), for unrolled decoding: a scan slices
        every layer's weights out of the stacked arrays on every call, which CPU backends copy."""
        _, state = nnx.split(self.layers)
        return tuple(jax.tree.map(lambda x, i=i: x[i], state) for i in range(self.cfg.num_layers))

    def hidden_states(self, tokens: jax.Array, positions=None, segment_ids=None, attention_mask=None,
                      cache: KVCache | None = None, layer_states: tuple[nnx.State, ...] | None = None,
                      kv_window: int | None = None):
        """Final-norm hidden states [batch, seq, d_model] (and the updated cache when given one).

        kv_window (static, with a cache): attend to the first kv_window slots only; the caller
        guarantees every filled slot lies below it (prefill chunks skip the empty end of the bucket).

        With `layer_states` (from split_layers) and a per-layer cache the layers run unrolled, each on
        its own weight and cache buffers; otherwise they run in a scan over the stacked weights.
        """
        cfg = self.cfg
        dt = jnp.dtype(cfg.dtype)
        if attention_mask is None:
            attention_mask = (segment_ids != 0) if segment_ids is not None else jnp.ones(tokens.shape, bool)
        if cache is None:
            mask = build_mask(attention_mask, segment_ids)
            if positions is None:
                positions = default_positions(attention_mask, segment_ids)
        else:
            mask = build_cache_mask(cache.lengths, attention_mask, min(kv_window or cache.max_len, cache.max_len))
            if positions is None:
                positions = cache.lengths[:, None] + jnp.arange(tokens.shape[1])[None, :]
        inv_freq = rope_inv_freq(cfg.dim_head, cfg.rope_theta, cfg.rope_scaling)
        x = jnp.take(self.embed.get_value(), tokens, axis=0).astype(dt)   # [batch, seq, d_model]
        x = constrain(x, _ACT)

        graphdef, layer_state = nnx.split(self.layers)
        if layer_states is not None:
            x, kv = self._unrolled_layers(graphdef, layer_states, x, positions, mask, inv_freq, cache)
        else:
            x, kv = self._scanned_layers(graphdef, layer_state, x, positions, mask, inv_freq, cache)
        x = self.final_norm(x)
        if cache is None:
            return x
        new_len = cache.lengths + attention_mask.astype(jnp.int32).sum(-1)
        return x, KVCache(kv[0], kv[1], new_len)

    def _scanned_layers(self, graphdef, layer_state, x, positions, mask, inv_freq, cache):
        """All layers in one scan over the stacked weights -> (x, (k, v) stacked caches or None)."""
        cfg = self.cfg

        def body(carry, xs):
            x, kv = carry
            state, layer = xs
            block = nnx.merge(graphdef, state)
            layer_cache = None if kv is None else (*kv, cache.lengths, layer)
            x, new_kv = block(x, positions, mask, inv_freq, layer_cache)
            return (x, new_kv), None

        if cfg.remat == "full":
            body = jax.checkpoint(body)
        elif cfg.remat == "dots":
            body = jax.checkpoint(body, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
        # The stacked caches ride in the scan carry, so each layer updates its new slots in place.
        kv = None if cache is None else (cache.k, cache.v)
        (x, kv), _ = jax.lax.scan(body, (x, kv), (layer_state, jnp.arange(cfg.num_layers)))
        return x, kv

    @staticmethod
    def _unrolled_layers(graphdef, layer_states, x, positions, mask, inv_freq, cache):
        """Layers one by one on their own weights and caches -> (x, (k, v) per-layer tuples)."""
        if cache is None or not cache.per_layer:
            raise ValueError("layer_states (unrolled layers) need a per-layer KVCache")
        ks, vs = list(cache.k), list(cache.v)
        for i, state in enumerate(layer_states):
            block = nnx.merge(graphdef, state)
            x, (ks[i], vs[i]) = block(x, positions, mask, inv_freq, (ks[i], vs[i], cache.lengths, None))
        return x, (tuple(ks), tuple(vs))

    def __call__(self, tokens: jax.Array, positions=None, segment_ids=None, attention_mask=None,
                 cache: KVCache | None = None, layer_states: tuple[nnx.State, ...] | None = None):
        out = self.hidden_states(tokens, positions, segment_ids, attention_mask, cache, layer_states)
        if cache is None:
            return self.logits_from_hidden(out)
        hidden, new_cache = out
        return self.logits_from_hidden(hidden), new_cache

    def init_cache(self, batch: int, max_len: int, dtype=None, per_layer: bool = False) -> KVCache:
        return KVCache.zeros(self.cfg, batch, max_len, dtype, per_layer)


class RewardModel(nnx.Module):
    """Transformer backbone + scalar head (Bradley–Terry reward model, HF `*ForSequenceClassification`).

    Returns one reward per row, read at the row's last valid token: [batch] float32.
    """

    def __init__(self, cfg: ModelConfig, rngs: nnx.Rngs):
        self.cfg = cfg
        self.backbone = Transformer(cfg, rngs, lm_head=False)
        self.score = param(rngs, (cfg.d_model,), ("embed",), jnp.dtype(cfg.param_dtype), cfg.d_model ** -0.5)

    def token_rewards(self, tokens, attention_mask=None, positions=None, segment_ids=None) -> jax.Array:
        hidden = self.backbone.hidden_states(tokens, positions, segment_ids, attention_mask)
        return jnp.einsum("btd,d->bt", hidden.astype(jnp.float32),
                          self.score.get_value().astype(jnp.float32))      # [batch, seq]

    def __call__(self, tokens: jax.Array, attention_mask: jax.Array | None = None) -> jax.Array:
        if attention_mask is None:
            attention_mask = jnp.ones(tokens.shape, bool)
        per_token = self.token_rewards(tokens, attention_mask)
        # Last valid token of each (right-padded) row.
        last = jnp.maximum(attention_mask.astype(jnp.int32).sum(-1) - 1, 0)
        return jnp.take_along_axis(per_token, last[:, None], axis=1)[:, 0]   # [batch]
